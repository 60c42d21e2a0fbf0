"""Keep the cyclic garbage collector off start-up objects: a loaded process runs full
collections every few seconds, each walking Django, the modules, the tools and pydantic's
schemas; after ``gc.freeze()`` they walk only what was made since (``GC_FREEZE``)."""

from __future__ import annotations

import gc
import logging

from ..conf import get_config

logger = logging.getLogger("mcp_tasks")


def freeze_startup_objects() -> bool:
    """``gc.freeze()`` after one full collection, unless ``MCP_TASKS["GC_FREEZE"]`` is off.
    True when it froze."""
    if not get_config().GC_FREEZE:
        return False
    gc.collect()
    gc.freeze()
    logger.debug("gc: %d start-up objects frozen", gc.get_freeze_count())
    return True
