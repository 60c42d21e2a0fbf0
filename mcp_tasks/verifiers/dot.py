"""Deprecated: now :mod:`mcp_tasks.auth.verifiers.dot`."""

from __future__ import annotations

from ..auth.verifiers.dot import verify
from . import moved

__all__ = ["verify"]

moved(__name__, "mcp_tasks.auth.verifiers.dot")
