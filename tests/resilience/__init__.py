"""Resilience: workers, Redis and servers killed or restarted; several ASGI processes."""
