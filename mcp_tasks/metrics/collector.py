"""The gauges that describe the deployment's state, read from the database at each scrape:
tasks not over yet by status, questions waiting for an answer by audience, and the age of
the oldest. Every process serves the same values: aggregate them with ``max``, not ``sum``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime

from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..models import ACTIVE_STATUSES, Audience, InputRequest, InputRequestStatus, Task

logger = logging.getLogger("mcp_tasks.metrics")


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            "mcp_tasks_tasks_active",
            "Tasks not over yet, by status (working, input_required).",
            labels=["status"],
        ),
        GaugeMetricFamily(
            "mcp_tasks_questions_waiting",
            "Questions of tasks waiting for an answer, by audience (client, staff).",
            labels=["audience"],
        ),
        GaugeMetricFamily(
            "mcp_tasks_questions_oldest_age_seconds",
            "Seconds the oldest question waiting for an answer has waited, by audience "
            "(0: none waits).",
            labels=["audience"],
        ),
    )


class DatabaseCollector(Collector):
    """Two aggregate queries per scrape (the status columns are indexed)."""

    def describe(self) -> Iterator[Metric]:
        return iter(_families())

    def collect(self) -> Iterator[Metric]:
        active, waiting, oldest = _families()
        try:
            by_status = dict(
                Task.objects.filter(status__in=ACTIVE_STATUSES)
                .order_by()
                .values_list("status")
                .annotate(count=Count("pk"))
            )
            questions: dict[str, tuple[int, datetime | None]] = {
                audience: (count, first)
                for audience, count, first in InputRequest.objects.filter(
                    status=InputRequestStatus.PENDING
                )
                .order_by()
                .values_list("audience")
                .annotate(count=Count("pk"), first=Min("created_at"))
            }
        except DatabaseError:
            logger.warning("metrics: could not read the tasks' state", exc_info=True)
            return iter(())
        now = timezone.now()
        for status in ACTIVE_STATUSES:
            active.add_metric([str(status)], by_status.get(status, 0))
        for audience in Audience:
            count, first = questions.get(audience, (0, None))
            waiting.add_metric([str(audience)], count)
            age = 0.0 if first is None else (now - first).total_seconds()
            oldest.add_metric([str(audience)], max(0.0, age))
        return iter((active, waiting, oldest))
