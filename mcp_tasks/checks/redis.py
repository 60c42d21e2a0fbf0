"""System checks of the task queues' and the channel layer's Redis settings, read without
connecting: E019, settings that cannot work; W016, users that do not all follow the same
Sentinel service (a failover would move only some)."""

from __future__ import annotations

from django.core.checks import CheckMessage, Error, Warning as CheckWarning

from ..conf import get_config
from ..core.redis_clients import RedisTarget, layer_targets, queue_target
from .workers import configured_queues, task_queues


def redis_users() -> list[RedisTarget]:
    """Every Redis mcp_tasks connects to, as configured (none in embedded mode but the
    channel layer's, if it is channels_redis')."""
    config = get_config()
    known = configured_queues()  # a missing queue is E012
    queues = [] if config.EMBEDDED_WORKER else [name for name in task_queues() if name in known]
    return [queue_target(name) for name in queues] + layer_targets(config.CHANNEL_LAYER)


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
        described = "; ".join(f"{target.where}: {target.describe()}" for target in users)
        messages.append(
            CheckWarning(
                "The Redis users of mcp_tasks do not follow the same Redis: "
                f"{described}. A Sentinel failover moves only those that ask the "
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
