"""rq's bookkeeping of the jobs a :class:`~mcp_tasks.tasks.worker.TaskWorker` starts and
forgets, in one Lua script and round trip (rq's pipeline of ~10 commands per job cost a busy
worker a third of its CPU). It writes the same keys and values as rq, atomically;
``tests/tasks/test_rq_bookkeeping.py`` compares it with rq's own worker methods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import uuid4

from rq.defaults import RQ_KEY_PREFIX
from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE, Execution, ExecutionRegistry
from rq.job import JobStatus
from rq.utils import as_text, now, utcformat
from rq.worker import WorkerStatus

from . import fair_queue
from .fair_queue import Lease

#: KEYS and ARGV: as :meth:`Bookkeeping.run` lists them (executions are
#: ``rq:execution:<job>:<id>``, a job's execution registry ``rq:executions:<job>``). Jobs come
#: from the fair queue, then rq's own list. Returns {job id, execution id, prior hash of each
#: started job}, {ids parked for their limit}, and 1 when the fair queue still has jobs ready,
#: 2 when only for principals at their most here.
_SCRIPT = f"""
local job_prefix = ARGV[6]
{fair_queue.FUNCTIONS}
local worker_name, now, now_whole, now_text = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local monitoring, execution_prefix = tonumber(ARGV[5]), ARGV[7]
local mark_busy, to_take = ARGV[8] == '1', tonumber(ARGV[9])
local given, forgotten = tonumber(ARGV[10]), tonumber(ARGV[11])
local fair, lease_ttl, released = ARGV[12], tonumber(ARGV[13]), tonumber(ARGV[14])
local cap, running = tonumber(ARGV[15]), tonumber(ARGV[16])
local worker, index, queue, intermediate, started = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local moment = tonumber(now)

local k, a, worked = 6, 17, 0
for _ = 1, forgotten do
  local composite = ARGV[a + 1] .. ':' .. ARGV[a]
  redis.call('DEL', KEYS[k])
  redis.call('ZREM', KEYS[k + 2], composite)
  redis.call('SREM', index, composite)
  redis.call('DEL', KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 1])
  worked = worked + tonumber(ARGV[a + 2])
  k, a = k + 6, a + 3
end
if forgotten > 0 then
  redis.call('HINCRBY', worker, 'successful_job_count', forgotten)
  redis.call('HINCRBYFLOAT', worker, 'total_working_time', worked)
end
for _ = 1, released do
  release(ARGV[a], ARGV[a + 1], ARGV[a + 2], moment, lease_ttl)
  a = a + 3
end
local room = nil
if cap > 0 then room = {{cap = cap, left = {{}}}} end
for _ = 1, running do
  if room then room.left[ARGV[a]] = cap - tonumber(ARGV[a + 1]) end
  a = a + 2
end

local execution_ids, taken = a + given, {{}}
local function start(job_id, dequeued_by_rq)
  local job = job_prefix .. job_id
  local fields = redis.call('HGETALL', job)
  if #fields == 0 then  -- deleted while queued: skipped, as rq's dequeue skips it
    if dequeued_by_rq then redis.call('LREM', intermediate, 1, job_id) end
    return
  end
  local id = ARGV[execution_ids + #taken / 3]
  local composite = job_id .. ':' .. id
  local execution = execution_prefix .. ':' .. composite
  local registry = execution_prefix .. 's:' .. job_id
  local timeout = tonumber(redis.call('HGET', job, 'timeout'))
  local ttl = monitoring + 60
  if timeout and timeout > 0 then ttl = math.floor(math.min(timeout, monitoring)) + 60 end
  redis.call('HSET', execution, 'id', id, 'job_id', job_id, 'created_at', now,
    'last_heartbeat', now, 'worker_name', worker_name)
  redis.call('EXPIRE', execution, ttl)
  redis.call('ZADD', registry, now_whole + ttl + 60, id)
  redis.call('EXPIRE', registry, ttl + 60)
  redis.call('ZADD', started, now_whole + ttl, composite)
  redis.call('SADD', index, composite)
  redis.call('EXPIRE', index, ttl)  -- rq's prepare_job_execution beats it to this
  redis.call('HSET', job, 'last_heartbeat', now_text, 'status', 'started',
    'started_at', now_text, 'worker_name', worker_name)
  redis.call('PERSIST', job)
  if dequeued_by_rq then redis.call('LREM', intermediate, 1, job_id) end
  taken[#taken + 1] = job_id
  taken[#taken + 1] = id
  taken[#taken + 1] = fields
end
for i = 1, given do start(ARGV[a + i - 1], intermediate ~= queue) end
local parked, full = {{}}, false
if fair ~= '' and to_take > 0 then housekeeping(fair, moment, lease_ttl) end
for _ = 1, to_take do
  local job_id = nil
  if fair ~= '' then job_id, full = pick(fair, moment, lease_ttl, parked, room) end
  if full then break end  -- every principal waiting runs its most here: the slot stays free
  if not job_id then job_id = redis.call('LPOP', queue) end  -- another rq job of the queue
  if not job_id then break end
  start(job_id, false)
end
local more = 0
if fair ~= '' and settle_bell(fair) then
  if full then more = 2 else more = 1 end
end
if mark_busy and #taken > 0 then redis.call('HSET', worker, 'state', 'busy') end
return {{taken, parked, more}}
"""


#: The job's times :meth:`Bookkeeping._started` reads (or sets) instead of ``Job.restore``.
_TIMES = (b"created_at", b"enqueued_at", b"started_at", b"last_heartbeat")


class Succeeded(Protocol):
    """A task job that succeeded and keeps nothing in rq (``result_ttl=0``), and execution."""

    job: Any
    execution: Execution


@dataclass
class Started:
    """A job the script started (``lease``: of its concurrency limit, given back at its end)."""

    job: Any
    queue: Any
    execution: Execution
    lease: Lease | None = None
    principal: str | None = None  # whose line it waited in


@dataclass
class Room:
    """Most jobs one principal may run on a worker (``RESERVED_SLOTS``), and each one's count."""

    cap: int
    running: dict[str, int]


@dataclass
class Taken:
    """One run of the script: jobs started, ids parked for their limit; whether jobs this
    worker may take are ready (``more``), or only of principals at their most here (``full``)."""

    started: list[Started] = field(default_factory=list)
    parked: list[str] = field(default_factory=list)
    more: bool = False
    full: bool = False


class Bookkeeping:
    """Starts and forgets a worker's jobs with :data:`_SCRIPT`."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self._script = worker.connection.register_script(_SCRIPT)
        self._index_key = WORKER_EXECUTIONS_KEY_TEMPLATE.format(worker.name)
        self._started_keys: dict[str, str] = {}  # by queue name

    def run(
        self,
        queue: Any,
        *,
        take: int = 0,
        job_ids: Sequence[str] = (),
        forgotten: Sequence[Succeeded] = (),
        released: Sequence[Lease] = (),
        room: Room | None = None,
    ) -> Taken:
        """Forget ``forgotten``, give back ``released``, start ``job_ids`` (dequeued by rq) and
        up to ``take`` jobs of ``queue`` (fair queue first), as rq would; ``room`` bounds each
        principal. Returns the started jobs in order (none deleted or no longer queued)."""
        worker = self.worker
        one_queue = len(worker.queues) == 1
        keys = [
            worker.key,
            self._index_key,
            queue.key,
            queue.intermediate_queue_key if one_queue else queue.key,
            self._started_key(queue.name, queue),
        ]
        moment = now()
        args: list[Any] = [
            worker.name,
            moment.timestamp(),
            int(moment.timestamp()),
            utcformat(moment),
            worker.job_monitoring_interval,
            worker.job_class.redis_job_namespace_prefix,
            f"{RQ_KEY_PREFIX}:execution",
            "1" if worker._state != WorkerStatus.BUSY else "0",
            take,
            len(job_ids),
            len(forgotten),
            fair_queue.prefix_of(queue.name) if take else "",
            fair_queue.lease_seconds(),
            len(released),
            room.cap if room else 0,
            len(room.running) if room else 0,
        ]
        for entry in forgotten:
            job, execution = entry.job, entry.execution
            keys += [
                execution.key,
                ExecutionRegistry.key_template.format(job.id),
                self._started_key(job.origin, job),
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
        for lease in released:
            args += lease.args()
        for principal, count in room.running.items() if room else ():
            args += [principal, count]
        args += [*job_ids, *(uuid4().hex for _ in range(take + len(job_ids)))]
        taken, parked, more = self._script(keys=keys, args=args)
        started = [
            self._started(queue, job_id, execution_id, fields, moment)
            for job_id, execution_id, fields in zip(
                taken[::3], taken[1::3], taken[2::3], strict=True
            )
        ]
        if started:
            worker._state = WorkerStatus.BUSY
        return Taken(started, [as_text(job_id) for job_id in parked], more == 1, more == 2)

    def _started(
        self, queue: Any, job_id: bytes, execution_id: bytes, fields: list[Any], at: Any
    ) -> Started:
        worker = self.worker
        job = worker.job_class(as_text(job_id), connection=worker.connection)
        job.serializer = worker.serializer  # resolved once by the worker; Job would again
        stored = dict(zip(fields[::2], fields[1::2], strict=True))
        # rq parses times with strptime; the ones set below need no parsing, these are ISO.
        times = {name: stored.pop(name, None) for name in _TIMES}
        job.restore(stored)
        if created := times[b"created_at"]:
            job.created_at = datetime.fromisoformat(created.decode())
        if enqueued := times[b"enqueued_at"]:
            job.enqueued_at = datetime.fromisoformat(enqueued.decode())
        job.redis_server_version = worker.get_redis_server_version()
        job.worker_name = worker.name
        job.last_heartbeat = job.started_at = at
        job._status = JobStatus.STARTED
        execution = Execution(as_text(execution_id), job.id, worker.connection, worker.name)
        execution.created_at = execution.last_heartbeat = at
        execution._job = job
        limit = as_text(stored.get(b"mcp_limit") or b"")
        lease = Lease(queue.name, limit, job.id) if limit else None
        principal = stored.get(b"mcp_principal")
        return Started(job, queue, execution, lease, as_text(principal) if principal else None)

    def _started_key(self, queue_name: str, owner: Any) -> str:
        """The queue's started-registry key, cached (``owner``: the queue or one of its jobs)."""
        key = self._started_keys.get(queue_name)
        if key is None:
            key = self._started_keys[queue_name] = str(owner.started_job_registry.key)
        return key
