"""``/metrics`` in Prometheus' text format: 404 while metrics are off; with
``METRICS_TOKEN`` set, 401 without ``Authorization: Bearer <token>``."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.utils.crypto import constant_time_compare
from django.views.decorators.http import require_safe

from ..conf import get_config
from . import switch


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Serve the metrics of every process of this host and the database's gauges."""
    exposition = switch.exposition()
    if exposition is None:
        raise Http404("Metrics are off (MCP_TASKS['METRICS']).")
    token = get_config().METRICS_TOKEN
    if token and not constant_time_compare(
        request.headers.get("Authorization", ""), f"Bearer {token}"
    ):
        return HttpResponse(
            "A bearer token is required.",
            status=401,
            content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    body, content_type = exposition.render(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
