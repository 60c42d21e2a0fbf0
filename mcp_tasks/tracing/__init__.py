"""OpenTelemetry traces (``MCP_TASKS["TRACING"]``): :mod:`.switch` turns them on,
:mod:`.tracer` opens the spans of :mod:`mcp_tasks.core.trace_hook`."""
