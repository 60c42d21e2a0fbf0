"""Prometheus metrics (``MCP_TASKS["METRICS"]``): :mod:`.switch` turns them on,
:mod:`.recorder` counts the reports of :mod:`mcp_tasks.core.metrics_hook` in
:mod:`.registry`, :mod:`.collector` reads gauges from the database, :mod:`.view` serves."""
