"""Resumable legacy SSE streams: events sent after the connection closed are stored, and a
``GET`` with ``Last-Event-ID`` (to any process) replays them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from .models import StreamEvent

#: How long undelivered events are kept.
KEEP_FOR = timedelta(hours=1)


def parse_event_id(value: str | None) -> tuple[str, int] | None:
    """``(stream_id, sequence)`` from a ``Last-Event-ID`` header, or None."""
    if not value:
        return None
    stream_id, _, sequence = value.rpartition(":")
    if not stream_id or len(stream_id) > 64 or "\x00" in stream_id:
        return None
    if not (sequence.isascii() and sequence.isdigit() and len(sequence) <= 18):
        return None
    return stream_id, int(sequence)


async def store(stream_id: str, session_id: str, sequence: int, message: dict[str, Any]) -> None:
    await StreamEvent.objects.acreate(
        stream_id=stream_id, session_id=session_id, sequence=sequence, message=message
    )


async def events_after(
    stream_id: str, session_id: str, sequence: int
) -> list[tuple[int, dict[str, Any]]]:
    """Stored events of the session's stream after ``sequence``, in order."""
    rows = StreamEvent.objects.filter(
        stream_id=stream_id, session_id=session_id, sequence__gt=sequence
    )
    return [(row.sequence, row.message) async for row in rows.order_by("sequence")]


def purge_old_events() -> int:
    deleted, _ = StreamEvent.objects.filter(created_at__lt=timezone.now() - KEEP_FOR).delete()
    return deleted
