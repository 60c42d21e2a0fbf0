"""``manage.py mcp_tasks_queue``: what waits in the task queues, per principal and limit."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ...conf import get_config
from ...tasks.queues import fair_queue, queue as task_queue


class Command(BaseCommand):
    help = (
        "Show the task jobs waiting in a queue's fair queue: ready jobs per principal (in "
        "turn order), jobs waiting for a concurrency slot per limit, jobs due later (retries), "
        "and the jobs running now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "queues", nargs="*", help="rq queue names (default: MCP_TASKS['TASK_QUEUE'])"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        for name in options["queues"] or [get_config().TASK_QUEUE]:
            queue = task_queue.get_queue(name)
            waiting = fair_queue.waiting(queue.connection, name)
            self.stdout.write(self.style.MIGRATE_HEADING(f"queue {name}"))
            self.stdout.write(f"running: {queue.started_job_registry.count}")
            ready = sum(waiting.ready.values())
            self.stdout.write(f"ready: {ready} job(s) of {len(waiting.ready)} principal(s)")
            for principal, count in waiting.ready.items():
                self.stdout.write(f"  {principal}: {count}")
            held = sum(waiting.held.values())
            self.stdout.write(f"waiting for a concurrency slot: {held}")
            for limit, count in sorted(waiting.held.items()):
                self.stdout.write(f"  {limit}: {count}")
            self.stdout.write(f"due later (retries): {waiting.delayed}")
