from __future__ import annotations

from django.apps import AppConfig, apps
from django.core.signals import setting_changed


class McpTasksConfig(AppConfig):
    name = "mcp_tasks"
    verbose_name = "MCP tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, conf  # noqa: F401  (importing checks registers them)

        setting_changed.connect(conf.reset_config, dispatch_uid="mcp_tasks.conf.reset_config")
        if apps.is_installed("django_rq"):
            from .protocol import tasks

            tasks.install()
