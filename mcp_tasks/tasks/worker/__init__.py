"""What runs jobs: the rq worker classes, a job with its caller's context (:mod:`.job`,
:mod:`.backend`), their shared runtime and the intake from the fair queue.

Layer order inside the task engine: :mod:`.worker` → :mod:`..state` → :mod:`..queues`."""

from .forking_worker import ForkingTaskWorker
from .task_worker import EmbeddedTaskWorker, TaskWorker

__all__ = ["EmbeddedTaskWorker", "ForkingTaskWorker", "TaskWorker"]
