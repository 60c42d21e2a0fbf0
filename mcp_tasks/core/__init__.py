"""The base every layer stands on: JSON-RPC, the ORM from async code, background
coroutines, group names, the task contract and the hooks."""

import importlib.util

#: The longest duration anything takes in seconds: a century (a deadline must stay a date).
LONGEST_SECONDS = 100 * 365 * 86400


def module_available(name: str) -> bool:
    """Whether ``name`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def is_id(value: object) -> bool:
    """Whether ``value`` is a JSON-RPC id or progress token: a string or an integer (JSON
    true/false is neither, though a bool is an int in Python)."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def is_count(value: object) -> bool:
    """Whether ``value`` is an int >= 1 (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
