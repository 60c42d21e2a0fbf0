"""What runs jobs: the rq worker classes (``mcp_tasks.tasks.worker.TaskWorker``,
``ForkingTaskWorker``; the embedded mode's ``EmbeddedTaskWorker``), a job run with its
caller's context restored (:mod:`.job`, :mod:`.backend`), the runtime its jobs share
(wake-ups, heartbeat, slots) and the intake of jobs from the fair queue.

Layer order inside the task engine: :mod:`.worker` → :mod:`..state` → :mod:`..queues`."""

from .forking_worker import ForkingTaskWorker
from .task_worker import EmbeddedTaskWorker, TaskWorker

__all__ = ["EmbeddedTaskWorker", "ForkingTaskWorker", "TaskWorker"]
