"""django-rq's dashboard, linked from the task pages. In embedded mode the queue lives on
an in-process fake Redis no dashboard sees (and ``RQ_QUEUES`` may be unset: HTTP 500), so
the admin neither links nor lists it and its pages send staff to the task list."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, URLPattern, reverse

from ..conf import get_config

EMBEDDED_NOTE = (
    "Embedded mode: the task queue runs inside this process, where django-rq's dashboard "
    "cannot see it. The tasks are listed here."
)


def queue_dashboard_url() -> str | None:
    """django-rq's dashboard: the project's ``django_rq.urls`` include, or the one
    django-rq mounts inside the admin; None in embedded mode."""
    if get_config().EMBEDDED_WORKER:
        return None
    for name in ("django_rq:home", "admin:django_rq_home"):
        try:
            return reverse(name)
        except NoReverseMatch:
            continue
    return None


class _OutsideEmbeddedMode:
    """django-rq's admin entry, hidden in embedded mode and its pages sent elsewhere."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        visible: bool = super().has_module_permission(request)  # type: ignore[misc]
        return visible and not get_config().EMBEDDED_WORKER

    def get_urls(self) -> list[Any]:
        urls: list[Any] = super().get_urls()  # type: ignore[misc]
        for pattern in urls:
            if isinstance(pattern, URLPattern):
                pattern.callback = _task_list_in_embedded_mode(pattern.callback)
        return urls


def _task_list_in_embedded_mode(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @functools.wraps(view)
    def dashboard_or_task_list(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not get_config().EMBEDDED_WORKER:
            return view(request, *args, **kwargs)
        messages.info(request, EMBEDDED_NOTE, fail_silently=True)
        return HttpResponseRedirect(reverse("admin:mcp_tasks_task_changelist"))

    return dashboard_or_task_list


def follow_embedded_mode(site: admin.AdminSite = admin.site) -> None:
    """Register django-rq's admin entry again, as itself outside embedded mode and hidden
    in it (idempotent; nothing when django-rq registers none)."""
    if not apps.is_installed("django_rq"):
        return
    from django_rq.models import Dashboard

    if not site.is_registered(Dashboard):
        return
    base = type(site.get_model_admin(Dashboard))
    if issubclass(base, _OutsideEmbeddedMode):
        return
    site.unregister(Dashboard)
    site.register(Dashboard, type(base.__name__, (_OutsideEmbeddedMode, base), {}))
