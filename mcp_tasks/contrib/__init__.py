"""Optional, server-specific parts: uvicorn's HTTP protocols refusing late connections."""
