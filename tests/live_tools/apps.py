from __future__ import annotations

from django.apps import AppConfig


class LiveToolsConfig(AppConfig):
    name = "tests.live_tools"
    label = "live_tools"
    verbose_name = "MCP tools for the live-server tests"

    def ready(self) -> None:
        from . import (  # noqa: F401  (importing registers the tools)
            failover_tools,
            hostile_tools,
            legacy_task_tools,
            limit_tools,
            seed_tools,
            task_tools,
            tools,
        )
