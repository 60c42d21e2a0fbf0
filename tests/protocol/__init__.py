"""The protocol layer without a server: framing, dispatch, registry, request state, JSON text."""
