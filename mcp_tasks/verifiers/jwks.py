"""Deprecated: now :mod:`mcp_tasks.auth.verifiers.jwks`."""

from __future__ import annotations

from ..auth.verifiers.jwks import verify
from . import moved

__all__ = ["verify"]

moved(__name__, "mcp_tasks.auth.verifiers.jwks")
