"""The fair queue: task jobs wait for a worker in Redis, one line per principal.

rq's one FIFO list per queue makes one caller's backlog everyone's wait. Keys of queue
``Q``, under ``mcp_tasks:fair:Q``:

- ``:ready:<principal>``: the principal's job ids, FIFO (resumed or re-queued jobs first);
- ``:ring``: the principals with jobs ready, each once; a worker takes the first one's next
  job and puts it back at the end (round robin);
- ``:bell``: wake-up tokens idle workers ``BLPOP``;
- ``:newcomer`` (pub/sub): a principal joined ``:ring``; wakes a worker whose free slots are
  reserved (``RESERVED_SLOTS``, :mod:`~mcp_tasks.tasks.worker.newcomers`);
- ``:delayed``: jobs due later (a retry's back-off), by due time;
- ``:lease:<limit>`` / ``:wait:<limit>`` / ``:held``: concurrency limits
  (``TaskConfig(concurrency=N)``): a job starts only with one of ``N`` leases (a sorted set
  by expiry), else waits in the limit's line holding no slot; a dead worker's leases expire
  after ``TASK_LOST_AFTER`` seconds.

rq still keeps each job's hash (``rq:job:<id>``), so ``Job.fetch`` and django-rq's pages
work. Every change is one atomic Lua script; :mod:`.rq_bookkeeping` starts jobs with them."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rq.job import Job
from rq.utils import as_text

from ...authoring.registry import mcp
from ...conf import get_config

if TYPE_CHECKING:
    from ...models import Task

#: Every fair queue's keys start with this and the rq queue's name.
KEY_PREFIX = "mcp_tasks:fair:"
#: The principal every job waits as when ``FAIR_SHARE`` is off: one line, first in first out.
EVERYONE = "*"
#: Wake-up tokens kept at most; more jobs than idle workers need no more.
BELL_CAP = 64
#: Longest bell wait, in seconds: idle workers look for due retries and expired leases this often.
LONGEST_WAIT = 1.0


def prefix_of(queue_name: str) -> str:
    return f"{KEY_PREFIX}{queue_name}"


def bell_key(queue_name: str) -> str:
    return f"{prefix_of(queue_name)}:bell"


def newcomer_channel(queue_name: str) -> str:
    return f"{prefix_of(queue_name)}:newcomer"


#: Lua used by every script: ``job_prefix`` (``rq:job:``) is a local of the script.
FUNCTIONS = """
local function make_ready(prefix, principal, job_id, front)
  local ready = prefix .. ':ready:' .. principal
  local length
  if front then length = redis.call('LPUSH', ready, job_id)
  else length = redis.call('RPUSH', ready, job_id) end
  if length == 1 and redis.call('RPUSH', prefix .. ':ring', principal) > 1 then
    redis.call('PUBLISH', prefix .. ':newcomer', principal)
  end
end

local function ring(prefix, cap)
  local bell = prefix .. ':bell'
  if redis.call('LLEN', bell) < cap then redis.call('RPUSH', bell, '1') end
end

-- A waiting job of the limit goes to the front of its principal's line for each lease
-- free, the lease reserved for it (no other job can take it first).
local function promote_waiting(prefix, limit, now, lease_ttl)
  local leases, waiting = prefix .. ':lease:' .. limit, prefix .. ':wait:' .. limit
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  local first = redis.call('LINDEX', waiting, 0)
  if not first then
    redis.call('SREM', prefix .. ':held', limit)
    return 0
  end
  local most = tonumber(redis.call('HGET', job_prefix .. first, 'mcp_limit_size') or '1')
  local free, promoted = most - redis.call('ZCARD', leases), 0
  while free > 0 do
    local job_id = redis.call('LPOP', waiting)
    if not job_id then break end
    local principal = redis.call('HGET', job_prefix .. job_id, 'mcp_principal')
    if principal then
      redis.call('ZADD', leases, now + lease_ttl, job_id)
      make_ready(prefix, principal, job_id, true)
      free, promoted = free - 1, promoted + 1
    end
  end
  if redis.call('LLEN', waiting) == 0 then redis.call('SREM', prefix .. ':held', limit) end
  return promoted
end

local function release(prefix, limit, job_id, now, lease_ttl)
  redis.call('ZREM', prefix .. ':lease:' .. limit, job_id)
  if promote_waiting(prefix, limit, now, lease_ttl) > 0 then ring(prefix, BELL_CAP) end
end

-- Due retries to the front of their principal's line; the leases of workers that died,
-- at most once a second across all workers.
local function housekeeping(prefix, now, lease_ttl)
  local delayed = prefix .. ':delayed'
  for _, job_id in ipairs(redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, 64)) do
    redis.call('ZREM', delayed, job_id)
    local principal = redis.call('HGET', job_prefix .. job_id, 'mcp_principal')
    if principal then make_ready(prefix, principal, job_id, true) end
  end
  if redis.call('SET', prefix .. ':swept', '1', 'PX', 1000, 'NX') then
    for _, limit in ipairs(redis.call('SRANDMEMBER', prefix .. ':held', 100)) do
      promote_waiting(prefix, limit, now, lease_ttl)
    end
  end
end

-- The next job to start, in the principals' turn, or nil. A job over its limit goes to
-- the limit's line (its id added to ``parked``); a job no longer queued (cancelled, gone)
-- is dropped. ``room``: how many more jobs each principal may start on this worker
-- (``room.left[principal]``, else ``room.cap``; nil: no bound); a principal without room
-- keeps its place and its turn passes. Returns the job id, and true when no principal in
-- line has room.
local function pick(prefix, now, lease_ttl, parked, room)
  local ring_key = prefix .. ':ring'
  local passed = 0
  for _ = 1, 64 do
    local principal = redis.call('LPOP', ring_key)
    if not principal then return nil, false end
    if room and (room.left[principal] or room.cap) <= 0 then
      redis.call('RPUSH', ring_key, principal)
      passed = passed + 1
      if passed >= redis.call('LLEN', ring_key) then return nil, true end
    else
      passed = 0
      local ready = prefix .. ':ready:' .. principal
      local job_id = redis.call('LPOP', ready)
      if redis.call('LLEN', ready) > 0 then redis.call('RPUSH', ring_key, principal) end
      local take = false
      if job_id then
        local fields = redis.call(
          'HMGET', job_prefix .. job_id, 'status', 'mcp_limit', 'mcp_limit_size')
        local status, limit = fields[1], fields[2]
        local limited = limit and limit ~= ''
        if status == 'queued' then
          if not limited then
            take = true
          else
            local leases = prefix .. ':lease:' .. limit
            redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
            if redis.call('ZSCORE', leases, job_id)
              or redis.call('ZCARD', leases) < tonumber(fields[3] or '1') then
              redis.call('ZADD', leases, now + lease_ttl, job_id)
              take = true
            else
              redis.call('RPUSH', prefix .. ':wait:' .. limit, job_id)
              redis.call('SADD', prefix .. ':held', limit)
              parked[#parked + 1] = job_id
            end
          end
        elseif limited then
          release(prefix, limit, job_id, now, lease_ttl)
        end
      end
      if take then
        if room then room.left[principal] = (room.left[principal] or room.cap) - 1 end
        return job_id, false
      end
    end
  end
  return nil, false
end

-- The bell after a take: silent once nothing is ready, and holding a token while jobs
-- are (a worker blocks on it without looking first). True when jobs are ready.
local function settle_bell(prefix)
  local bell = prefix .. ':bell'
  if redis.call('LLEN', prefix .. ':ring') == 0 then
    redis.call('DEL', bell)
    return false
  end
  if redis.call('LLEN', bell) == 0 then redis.call('RPUSH', bell, '1') end
  return true
end
""".replace("BELL_CAP", str(BELL_CAP))

#: Queue a job in its principal's line (or for later) and wake a worker. KEYS: the job's hash.
#: ARGV: job prefix, queue prefix, job id, principal, "1" for the front of the line, due time
#: (0: now), limit ("" for none), limit size.
PUSH = f"""
local job_prefix = ARGV[1]
{FUNCTIONS}
local prefix, job_id, principal, front = ARGV[2], ARGV[3], ARGV[4], ARGV[5] == '1'
local due, limit = tonumber(ARGV[6]), ARGV[7]
redis.call('HSET', KEYS[1], 'mcp_principal', principal, 'mcp_limit', limit,
  'mcp_limit_size', ARGV[8])
if due > 0 then
  redis.call('ZADD', prefix .. ':delayed', due, job_id)
  return 0
end
make_ready(prefix, principal, job_id, front)
ring(prefix, BELL_CAP)
return 1
""".replace("BELL_CAP", str(BELL_CAP))

#: SHA1 of :data:`PUSH`, pushed with ``EVALSHA`` (an enqueue sends no script text); a Redis
#: that lacks it (restarted, flushed) gets it from :func:`load_push`.
PUSH_SHA = hashlib.sha1(PUSH.encode()).hexdigest()


def push_command(keys: list[str], args: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The ``EVALSHA`` of :data:`PUSH`, as a redis-py pipeline records a command."""
    return ("EVALSHA", PUSH_SHA, len(keys), *keys, *args), {}


def load_push(connection: Any) -> Any:
    """Make :data:`PUSH` known to the connection's Redis (an awaitable for an async client)."""
    return connection.script_load(PUSH)


#: For rq's own worker classes (:class:`~mcp_tasks.tasks.worker.ForkingTaskWorker`): the next
#: job (fair queue's, else rq's list's), moved to rq's intermediate queue as rq's dequeue does.
#: KEYS: the queue, its intermediate queue. ARGV: job prefix, queue prefix, now, lease seconds.
#: Returns {job id or false, its limit, parked job ids, 1 when jobs are still ready}.
TAKE_ONE = f"""
local job_prefix = ARGV[1]
{FUNCTIONS}
local prefix, now, lease_ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
housekeeping(prefix, now, lease_ttl)
local parked = {{}}
local job_id = pick(prefix, now, lease_ttl, parked)
local limit = ''
if job_id then limit = redis.call('HGET', job_prefix .. job_id, 'mcp_limit') or ''
else job_id = redis.call('LPOP', KEYS[1]) end
if job_id then redis.call('RPUSH', KEYS[2], job_id) end
local more = 0
if settle_bell(prefix) then more = 1 end
return {{job_id or false, limit, parked, more}}
"""


#: Give back the leases of jobs that ended, waking the jobs waiting for them.
#: ARGV: job prefix, now, lease seconds, then (queue prefix, limit, job id) per lease.
RELEASE = f"""
local job_prefix = ARGV[1]
{FUNCTIONS}
local now, lease_ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV, 3 do release(ARGV[i], ARGV[i + 1], ARGV[i + 2], now, lease_ttl) end
return 0
"""

#: Take a cancelled job out of its lines (principal's, limit's, delayed); a lease reserved for
#: it goes to the next job. KEYS: its hash. ARGV: job prefix, queue prefix, id, now, lease ttl.
WITHDRAW = f"""
local job_prefix = ARGV[1]
{FUNCTIONS}
local prefix, job_id, now, lease_ttl = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local fields = redis.call('HMGET', KEYS[1], 'mcp_principal', 'mcp_limit')
local principal, limit = fields[1], fields[2]
if principal then
  local ready = prefix .. ':ready:' .. principal
  if redis.call('LREM', ready, 0, job_id) > 0 and redis.call('LLEN', ready) == 0 then
    redis.call('LREM', prefix .. ':ring', 0, principal)
  end
end
redis.call('ZREM', prefix .. ':delayed', job_id)
if limit and limit ~= '' then
  redis.call('LREM', prefix .. ':wait:' .. limit, 0, job_id)
  release(prefix, limit, job_id, now, lease_ttl)
end
settle_bell(prefix)
return 0
"""

#: Keep the leases of running jobs. ARGV: the expiry, then (queue prefix, limit, job id).
RENEW = """
for i = 2, #ARGV, 3 do
  redis.call('ZADD', ARGV[i] .. ':lease:' .. ARGV[i + 1], 'XX', ARGV[1], ARGV[i + 2])
end
return 0
"""


@dataclass(frozen=True)
class Limit:
    """A job's concurrency limit: Redis name, size, status message of a task waiting for it."""

    name: str
    size: int
    note: str


@dataclass(frozen=True)
class Lease:
    """A running job's lease of its limit."""

    queue_name: str
    limit: str
    job_id: str

    def args(self) -> list[str]:
        return [prefix_of(self.queue_name), self.limit, self.job_id]


def lease_seconds() -> float:
    """How long a lease lasts unless its worker renews it."""
    return float(get_config().TASK_LOST_AFTER)


def principal_of(task: Task) -> str:
    """The line the task's jobs wait in."""
    return task.principal_scope if get_config().FAIR_SHARE else EVERYONE


def _argument_text(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if len(text) > 64:  # bounded keys: a long value is named by its digest
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return text


def limit_of(task: Task) -> Limit | None:
    """The concurrency limit of the task's tool (for its argument's value), if it has one."""
    tool = mcp.tools.get(task.tool_name)
    if tool is None or tool.task.concurrency is None:
        return None
    size, key = tool.task.concurrency, tool.task.concurrency_key
    note = f"Waiting for a free slot: at most {size} {task.tool_name} task(s) run at once"
    if key is None:
        return Limit(task.tool_name, size, note)
    arguments = task.arguments if isinstance(task.arguments, dict) else {}
    value = _argument_text(arguments.get(key))
    return Limit(f"{task.tool_name}:{key}={value}", size, f"{note} for {key}={value}")


def push_args(task: Task, job: Job, *, delay: float = 0.0) -> tuple[list[str], list[Any]]:
    """KEYS, ARGV of :data:`PUSH` for the task's job (``delay``: seconds); reruns go first."""
    limit = limit_of(task)
    due = time.time() + delay if delay > 0 else 0
    return [job.key], [
        job.redis_job_namespace_prefix,
        prefix_of(job.origin),
        job.id,
        principal_of(task),
        "1" if task.runs > 0 else "0",
        due,
        limit.name if limit else "",
        limit.size if limit else 0,
    ]


@dataclass(frozen=True)
class TakenOne:
    """What :func:`take_one` found: job id (or None), lease, parked job ids, more ready."""

    job_id: str | None
    lease: Lease | None
    parked: list[str]
    more: bool
    full: bool = False


def take_one(connection: Any, queue: Any) -> TakenOne:
    """The next job of ``queue`` for rq's own dequeue (:data:`TAKE_ONE`)."""
    job_id, limit, parked, more = connection.eval(
        TAKE_ONE,
        2,
        queue.key,
        queue.intermediate_queue_key,
        Job.redis_job_namespace_prefix,
        prefix_of(queue.name),
        time.time(),
        lease_seconds(),
    )
    found = as_text(job_id) if job_id else None
    lease = Lease(queue.name, as_text(limit), found) if found and limit else None
    return TakenOne(found, lease, [as_text(p) for p in parked], bool(more))


def wait_for_bell(connection: Any, queue_names: list[str], timeout: float) -> None:
    """Block until a job may wait in the queues, or ``timeout`` (≤ :data:`LONGEST_WAIT`)."""
    wait = max(0.01, min(timeout, LONGEST_WAIT))
    connection.blpop([bell_key(name) for name in queue_names], wait)


def task_id_of_job(job_id: str) -> str | None:
    """The task id in a task job's id (``mcp_tasks-<task id>-<run>``), None for another job."""
    if not job_id.startswith("mcp_tasks-"):
        return None
    task_id, _, run = job_id[len("mcp_tasks-") :].rpartition("-")
    return task_id if task_id and run.isdigit() else None


def withdraw(connection: Any, queue_name: str, job_id: str) -> None:
    """Take the job ``job_id`` out of the queue's lines (:data:`WITHDRAW`)."""
    connection.eval(
        WITHDRAW,
        1,
        Job.redis_job_namespace_prefix + job_id,
        Job.redis_job_namespace_prefix,
        prefix_of(queue_name),
        job_id,
        time.time(),
        lease_seconds(),
    )


def release(connection: Any, leases: list[Lease]) -> None:
    """Give back ``leases`` (their jobs ended); the jobs waiting for them get them."""
    if not leases:
        return
    args: list[Any] = [Job.redis_job_namespace_prefix, time.time(), lease_seconds()]
    for lease in leases:
        args += lease.args()
    connection.eval(RELEASE, 0, *args)


def renew(connection: Any, leases: list[Lease]) -> None:
    """Extend ``leases`` (their jobs still run) by :func:`lease_seconds`."""
    if not leases:
        return
    args: list[Any] = [time.time() + lease_seconds()]
    for lease in leases:
        args += lease.args()
    connection.eval(RENEW, 0, *args)


@dataclass(frozen=True)
class Waiting:
    """What waits in one queue: ready jobs per principal (in turn), held per limit, delayed."""

    ready: dict[str, int]
    held: dict[str, int]
    delayed: int


def waiting(connection: Any, queue_name: str) -> Waiting:
    """A look at one queue's lines (not atomic; for operators and tests)."""
    prefix = prefix_of(queue_name)
    principals = [as_text(p) for p in connection.lrange(f"{prefix}:ring", 0, -1)]
    ready = {p: int(connection.llen(f"{prefix}:ready:{p}")) for p in principals}
    held = {
        as_text(limit): int(connection.llen(f"{prefix}:wait:{as_text(limit)}"))
        for limit in connection.smembers(f"{prefix}:held")
    }
    return Waiting(ready, held, int(connection.zcard(f"{prefix}:delayed")))


def job_ids(connection: Any, queue_name: str) -> list[str]:
    """Every job id waiting in one queue: ready (in turn order), held for a limit, delayed."""
    prefix = prefix_of(queue_name)
    lines = [f"{prefix}:ready:{as_text(p)}" for p in connection.lrange(f"{prefix}:ring", 0, -1)]
    lines += [f"{prefix}:wait:{as_text(limit)}" for limit in connection.smembers(f"{prefix}:held")]
    found = [job_id for line in lines for job_id in connection.lrange(line, 0, -1)]
    return [as_text(job_id) for job_id in found + connection.zrange(f"{prefix}:delayed", 0, -1)]
