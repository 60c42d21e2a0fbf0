"""Real clients against live servers: the mcp SDK (both eras), FastMCP 4, the TypeScript SDK."""
