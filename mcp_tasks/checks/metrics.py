"""System checks of ``MCP_TASKS["METRICS"]``: its package, and the directory that lets every
process of a host count together."""

from __future__ import annotations

import os

from django.core.checks import CheckMessage, Warning as CheckWarning

from ..conf import get_config
from ..metrics import switch


def check_metrics() -> list[CheckMessage]:
    if not get_config().METRICS:
        return []
    if not switch.available():
        return [
            CheckWarning(
                "MCP_TASKS['METRICS'] is on but prometheus_client is not installed, so "
                "nothing is counted and the metrics view answers 404.",
                hint="pip install 'django-mcp-tasks[metrics]' (or prometheus-client).",
                id="mcp_tasks.W012",
            )
        ]
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory and os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK):
        return []
    problem = (
        "is not set" if not directory else f"is {directory!r}, which is not a writable directory"
    )
    return [
        CheckWarning(
            f"MCP_TASKS['METRICS'] is on but PROMETHEUS_MULTIPROC_DIR {problem}: each "
            "process counts alone (single-process mode), so a scrape sees only the process "
            "that answers it, never the rq workers' counts.",
            hint=(
                "Set PROMETHEUS_MULTIPROC_DIR to an empty directory, the same for every ASGI "
                "and rq worker process of the host, before they start (the docs' 'Metrics'); a "
                "single development process may add 'mcp_tasks.W013' to "
                "SILENCED_SYSTEM_CHECKS."
            ),
            id="mcp_tasks.W013",
        )
    ]
