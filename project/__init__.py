"""The example project that serves the demo tools at ``/mcp``."""
