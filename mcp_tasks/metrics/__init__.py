"""Prometheus metrics (``MCP_TASKS["METRICS"]``, README "Metrics").

- :mod:`.switch`: turns them on in a process at start-up (and on ``setting_changed``) when
  the setting is on and ``prometheus_client`` is installed; imports nothing of it otherwise.
- :mod:`.recorder`: what the engine and the transport report through
  :mod:`mcp_tasks.core.metrics_hook`, counted in :mod:`.registry`'s metrics.
- :mod:`.collector`: the gauges read from the database at each scrape.
- :mod:`.view`: the Django view that serves them in Prometheus' text format.
"""
