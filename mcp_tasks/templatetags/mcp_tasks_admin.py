"""``{% load mcp_tasks_admin %}{% mcp_waiting_questions %}``: a link to the waiting questions
with their count, for the admin's header (shown only to staff who may see tasks)."""

from __future__ import annotations

from typing import Any

from django import template

from ..admin.model_admins import sees_tasks
from ..models import InputRequest, InputRequestStatus

register = template.Library()


@register.inclusion_tag("admin/mcp_tasks/waiting_questions.html", takes_context=True)
def mcp_waiting_questions(context: template.Context) -> dict[str, Any]:
    user = getattr(context.get("request"), "user", None)
    if not getattr(user, "is_staff", False) or not sees_tasks(user):
        return {"show": False}
    count = InputRequest.objects.filter(status=InputRequestStatus.PENDING).count()
    return {"show": True, "count": count}
