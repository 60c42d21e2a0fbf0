"""Deprecated: the token verifiers moved to :mod:`mcp_tasks.auth.verifiers`.

``MCP_TASKS["TOKEN_VERIFIER"]`` set to ``mcp_tasks.verifiers.dot.verify`` or
``mcp_tasks.verifiers.jwks.verify`` keeps working until 0.3 (check ``mcp_tasks.W011``)."""

from __future__ import annotations

import warnings


def moved(old: str, new: str) -> None:
    """Warn that module ``old`` is now ``new``."""
    warnings.warn(
        f"{old} moved to {new}; the old path goes away in mcp_tasks 0.3.",
        DeprecationWarning,
        stacklevel=3,
    )
