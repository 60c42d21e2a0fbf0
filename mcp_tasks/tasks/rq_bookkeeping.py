"""rq's bookkeeping of the jobs a :class:`~mcp_tasks.tasks.worker.TaskWorker` starts and
of the task jobs it forgets, written by one Lua script in one round trip.

rq builds that bookkeeping as a pipeline of about ten commands per job (the execution's
hash, the job's execution registry, the started registry, the worker's execution index,
the job's hash, the intermediate queue); building, sending and parsing them cost a
quarter of a busy worker's CPU. The script writes the same keys with the same values
(``tests/test_rq_bookkeeping.py`` compares it with rq's own code on a real Redis) and
runs atomically, as rq's ``MULTI`` did.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import uuid4

from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE, Execution, ExecutionRegistry
from rq.job import JobStatus
from rq.utils import now, utcformat

#: KEYS: the worker's hash, its execution index, then 5 per job that starts (its
#: execution, the job's execution registry, the started registry, the job, the
#: intermediate queue or the job again when there is none) and 6 per job forgotten (its
#: execution, the job's execution registry, the started registry, the job, its dependents
#: and its dependencies). ARGV: the worker's name, now (seconds as a float, as whole
#: seconds, in rq's text format), how many start, how many are forgotten, then 3 per job
#: that starts (execution id, job id, heartbeat TTL) and 3 per job forgotten (execution
#: id, job id, seconds it worked).
_SCRIPT = """
local worker_name, now, now_whole, now_text = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local starting, forgotten = tonumber(ARGV[5]), tonumber(ARGV[6])
local index = KEYS[2]
local k, a = 3, 7
for _ = 1, starting do
  local execution, registry, started, job, intermediate =
    KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local id, job_id, ttl = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local composite = job_id .. ':' .. id
  redis.call('HSET', execution, 'id', id, 'job_id', job_id, 'created_at', now,
    'last_heartbeat', now, 'worker_name', worker_name)
  redis.call('EXPIRE', execution, ttl)
  redis.call('ZADD', registry, now_whole + ttl + 60, id)
  redis.call('EXPIRE', registry, ttl + 60)
  redis.call('ZADD', started, now_whole + ttl, composite)
  redis.call('SADD', index, composite)
  redis.call('EXPIRE', index, ttl + 60)
  redis.call('HSET', job, 'last_heartbeat', now_text, 'status', 'started',
    'started_at', now_text, 'worker_name', worker_name)
  redis.call('PERSIST', job)
  if intermediate ~= job then
    redis.call('LREM', intermediate, 1, job_id)
  end
  k, a = k + 5, a + 3
end
local worked = 0
for _ = 1, forgotten do
  local execution, registry, started, job = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local composite = ARGV[a + 1] .. ':' .. ARGV[a]
  redis.call('DEL', execution)
  redis.call('ZREM', started, composite)
  redis.call('SREM', index, composite)
  redis.call('DEL', job, KEYS[k + 4], KEYS[k + 5], registry)
  worked = worked + tonumber(ARGV[a + 2])
  k, a = k + 6, a + 3
end
if forgotten > 0 then
  redis.call('HINCRBY', KEYS[1], 'successful_job_count', forgotten)
  redis.call('HINCRBYFLOAT', KEYS[1], 'total_working_time', worked)
end
return starting
"""


class Succeeded(Protocol):
    """A task job that succeeded and keeps nothing in rq (``result_ttl=0``), with its
    execution."""

    job: Any
    execution: Execution


class Bookkeeping:
    """Writes rq's bookkeeping of a worker's jobs with :data:`_SCRIPT`."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self._script = worker.connection.register_script(_SCRIPT)
        self._index_key = WORKER_EXECUTIONS_KEY_TEMPLATE.format(worker.name)
        self._started_keys: dict[str, str] = {}  # by queue name

    def start(
        self, jobs: Sequence[Any], queue: Any, forgotten: Sequence[Succeeded], client: Any = None
    ) -> list[Execution]:
        """Start ``jobs`` (dequeued from ``queue``) as rq's ``prepare_execution`` and
        ``prepare_job_execution`` do, and forget ``forgotten`` as rq forgets a finished
        job with no result to keep; ``client``: a pipeline to send the script on."""
        worker = self.worker
        connection = worker.connection
        keys = [worker.key, self._index_key]
        args: list[Any] = []
        executions = []
        started_at: datetime | None = None
        one_queue = len(worker.queues) == 1
        for job in jobs:
            execution = Execution(uuid4().hex, job.id, connection, worker_name=worker.name)
            execution._job = job
            started_at = started_at or execution.created_at
            execution.created_at = execution.last_heartbeat = started_at
            keys += [
                execution.key,
                ExecutionRegistry.key_template.format(job.id),
                self._started_key(job),
                job.key,
                queue.intermediate_queue_key if one_queue else job.key,
            ]
            args += [execution.id, job.id, worker.get_heartbeat_ttl(job)]
            job.worker_name = worker.name
            job.last_heartbeat = job.started_at = started_at
            job._status = JobStatus.STARTED
            executions.append(execution)
        for entry in forgotten:
            job, execution = entry.job, entry.execution
            keys += [
                execution.key,
                ExecutionRegistry.key_template.format(job.id),
                self._started_key(job),
                job.key,
                job.dependents_key,
                job.dependencies_key,
            ]
            worked = (
                (job.ended_at - job.started_at).total_seconds()
                if job.started_at is not None and job.ended_at is not None
                else 0.0
            )
            args += [execution.id, job.id, worked]
        moment = started_at or now()
        head = [
            worker.name,
            moment.timestamp(),
            int(moment.timestamp()),
            utcformat(moment),
            len(jobs),
            len(forgotten),
        ]
        self._script(keys=keys, args=head + args, client=client)
        return executions

    def _started_key(self, job: Any) -> str:
        """The key of the started registry of ``job``'s queue (rq's, made once per queue)."""
        key = self._started_keys.get(job.origin)
        if key is None:
            key = self._started_keys[job.origin] = str(job.started_job_registry.key)
        return key
