"""The legacy (2025-11-25) experimental tasks: raw wire, mcp 1.x, FastMCP 3."""
