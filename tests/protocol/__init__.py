"""The protocol layer without a server: framing, dispatch, the registry, request state, JSON text."""
