"""Keep the cyclic garbage collector off the objects every process makes at start-up.

A loaded process promotes many short-lived objects (a request's, a job's) to the oldest
generation before they die, so Python runs full collections every few seconds, and each
one walks every object alive: Django, the app's modules, the registered tools, pydantic's
schemas (the README's "Settings", ``GC_FREEZE``, has the figures).
:func:`freeze_startup_objects` collects once and then moves everything alive into the
permanent generation (``gc.freeze()``): full collections then walk only what was made
since. Start-up objects that
later become cyclic garbage are not reclaimed; they are few, and made once.
"""

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
