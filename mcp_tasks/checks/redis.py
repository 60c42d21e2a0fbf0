"""System checks of the Redis every user in mcp_tasks connects to: the task queues
(``RQ_QUEUES``, as django-rq reads them) and the channel layer (its ``hosts``, as
channels_redis reads them), read by :mod:`mcp_tasks.core.redis_clients` without connecting.
Called from :func:`mcp_tasks.checks.check_mcp_tasks`.

- ``mcp_tasks.E019``: a Redis user's settings cannot work (Sentinels without a master
  name, a master name without Sentinels, a URL and Sentinel keys together…).
- ``mcp_tasks.W016``: some users follow a Sentinel service and others a fixed address (or
  another Sentinel service): a failover moves only some of them.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning as CheckWarning

from ..authoring.registry import mcp
from ..conf import get_config
from ..core.redis_clients import RedisTarget, describe_all, layer_targets, queue_target


def _queue_names() -> list[str]:
    """The queues task jobs go to (``TASK_QUEUE`` and the tools' own), when configured."""
    names = [get_config().TASK_QUEUE]
    for tool in mcp.tools.values():
        if tool.task.mode != "forbidden" and tool.task.queue and tool.task.queue not in names:
            names.append(tool.task.queue)
    queues = getattr(settings, "RQ_QUEUES", None)
    known = set(queues) if isinstance(queues, dict) else set()
    return [name for name in names if name in known]  # a missing one is E012


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
