"""OpenTelemetry traces (``MCP_TASKS["TRACING"]``, README "Traces").

- :mod:`.switch`: turns them on in a process at start-up (and on ``setting_changed``) when
  the setting is on and ``opentelemetry`` is installed; imports nothing of it otherwise.
- :mod:`.tracer`: the spans the transport and the engine open through
  :mod:`mcp_tasks.core.trace_hook`, named after OpenTelemetry's MCP semantic conventions.
"""
