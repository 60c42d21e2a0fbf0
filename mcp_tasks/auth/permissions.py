"""Who may use a tool, prompt or resource (``@mcp.tool(permissions=[...], scopes=[...])``):
Django permissions the principal's user must hold (none without a user), and OAuth scopes a
bearer token must carry (a session user without a token is not limited by scopes). The
request path caches answers for ``PERMISSION_CACHE_TTL`` s; the worker asks before each job."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..conf import get_config
from ..core.db import db
from . import AccessToken, Principal


@dataclass(frozen=True)
class Access:
    """The permissions and scopes one registered item requires."""

    permissions: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    @property
    def is_open(self) -> bool:
        return not self.permissions and not self.scopes

    @classmethod
    def of(
        cls, what: str, permissions: Iterable[str] | None, scopes: Iterable[str] | None
    ) -> Access:
        """Validate the decorator's arguments (``ImproperlyConfigured`` early)."""
        perms = _strings(what, "permissions", permissions)
        for perm in perms:
            if perm.count(".") != 1 or perm.startswith(".") or perm.endswith("."):
                raise ImproperlyConfigured(
                    f"{what}: permission {perm!r} must be 'app_label.codename' "
                    "(e.g. 'reports.view_report')"
                )
        return cls(permissions=perms, scopes=_strings(what, "scopes", scopes))


def _strings(what: str, name: str, values: Iterable[str] | None) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        raise ImproperlyConfigured(f"{what}: {name} must be a list of strings, not a string")
    out = tuple(values)
    if not all(isinstance(value, str) and value and " " not in value for value in out):
        raise ImproperlyConfigured(f"{what}: {name} must be non-empty strings without spaces")
    return out


OPEN = Access()


def missing_scopes(access: Access, token: AccessToken | None, user: Any) -> list[str]:
    """The required scopes the caller lacks (a session user, without a token, lacks none)."""
    if not access.scopes:
        return []
    if token is None:
        return [] if _authenticated(user) else list(access.scopes)
    held = set(token.scopes)
    return [scope for scope in access.scopes if scope not in held]


def _authenticated(user: Any) -> bool:
    return user is not None and bool(getattr(user, "is_authenticated", False))


def allowed_now(access: Access, token: AccessToken | None, user: Any) -> bool:
    """Synchronous, uncached check (may query the database: call it from a thread)."""
    if missing_scopes(access, token, user):
        return False
    return not access.permissions or (
        _authenticated(user) and bool(user.has_perms(access.permissions))
    )


_cache: dict[tuple[Any, tuple[str, ...]], tuple[float, bool]] = {}
_CACHE_LIMIT = 10_000


async def _has_perms(user: Any, permissions: tuple[str, ...]) -> bool:
    if not _authenticated(user):
        return False
    if user.is_active and user.is_superuser:
        return True
    ttl = float(get_config().PERMISSION_CACHE_TTL)
    key = (user.pk, permissions)
    now = time.monotonic()
    hit = _cache.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    answer = bool(await db(user.has_perms)(permissions))
    if ttl > 0:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[key] = (now + ttl, answer)
    return answer


def clear_cache() -> None:
    """Forget every cached answer (tests, or after changing permissions in bulk)."""
    _cache.clear()


async def allowed(access: Access, principal: Principal) -> bool:
    """May ``principal`` use an item requiring ``access``? (Request path; cached briefly.)"""
    if missing_scopes(access, principal.access_token, principal.user):
        return False
    return not access.permissions or await _has_perms(principal.user, access.permissions)


async def listed(access: Access, principal: Principal) -> bool:
    """Does ``principal`` see the item in ``*/list``? When it may use it, or when only its
    token's scopes stand in the way (a call then gets HTTP 403 ``insufficient_scope``, and
    the client can step up)."""
    if principal.access_token is not None and access.scopes:
        access = replace(access, scopes=())
    return await allowed(access, principal)


async def visible(items: Sequence[Any], principal: Principal) -> list[Any]:
    """The items (anything with an ``access`` attribute) ``principal`` sees listed, in order
    (:func:`listed`)."""
    return [item for item in items if await listed(item.access, principal)]
