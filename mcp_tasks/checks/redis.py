"""System checks of the task queues' and the channel layer's Redis settings, read without
connecting: E019, settings that cannot work; W016, users that do not all follow the same
Sentinel service (a failover would move only some)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning as CheckWarning

from ..conf import get_config
from ..core.redis_clients import RedisTarget, describe_all, layer_targets, queue_target
from .workers import task_queues


def _queue_names() -> list[str]:
    """The queues task jobs go to (``TASK_QUEUE`` and the tools' own), when configured."""
    queues = getattr(settings, "RQ_QUEUES", None)
    known = set(queues) if isinstance(queues, dict) else set()
    return [name for name in task_queues() if name in known]  # a missing one is E012


def redis_users() -> list[RedisTarget]:
    """Every Redis mcp_tasks connects to, as configured (none in embedded mode but the
    channel layer's, if it is channels_redis')."""
    targets = [] if get_config().EMBEDDED_WORKER else [queue_target(n) for n in _queue_names()]
    return targets + layer_targets(get_config().CHANNEL_LAYER)


def check_redis() -> list[CheckMessage]:
    users = redis_users()
    messages: list[CheckMessage] = [
        Error(
            f"{target.where} {target.problem}: mcp_tasks cannot connect to that Redis.",
            hint=(
                "Write a fixed address (django-rq: 'URL'; channels_redis: a URL in 'hosts') or "
                "a Sentinel service (django-rq: 'SENTINELS': [(host, port), ...] with "
                "'MASTER_NAME'; channels_redis: {'sentinels': [(host, port), ...], "
                "'master_name': ...}). See the README's \"High availability\"."
            ),
            id="mcp_tasks.E019",
        )
        for target in users
        if target.problem is not None
    ]
    if messages:
        return messages
    services = {
        (target.master_name, frozenset(target.sentinels)) for target in users if target.is_sentinel
    }
    fixed = [target for target in users if not target.is_sentinel and not target.foreign]
    if services and (fixed or len({name for name, _ in services}) > 1):
        messages.append(
            CheckWarning(
                "The Redis users of mcp_tasks do not follow the same Redis: "
                f"{describe_all(users)}. A Sentinel failover moves only those that ask the "
                "Sentinels; the others keep using the old master (or another Redis), so jobs, "
                "wake-ups and notifications part ways.",
                hint=(
                    "Point every user at the same Sentinel service: RQ_QUEUES entries with "
                    "'SENTINELS' and 'MASTER_NAME', the channel layer's hosts with "
                    "'sentinels' and 'master_name'. If the fixed address is a Redis that fails "
                    "over behind one name (a managed service) or another Redis on purpose, "
                    "silence mcp_tasks.W016."
                ),
                id="mcp_tasks.W016",
            )
        )
    return messages
