"""Optional, server-specific parts: uvicorn's HTTP protocols for the MCP endpoint, which
refuse connections that waited too long in the kernel's accept queue."""
