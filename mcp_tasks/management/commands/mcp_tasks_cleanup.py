"""``manage.py mcp_tasks_cleanup``: task housekeeping, for cron or a periodic job."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from ...tasks.worker.task_worker import maintain


class Command(BaseCommand):
    help = (
        "Fail tasks whose worker died, re-queue tasks whose job was lost, time out unanswered "
        "questions, and delete expired tasks, idle legacy sessions and old stream events."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        for name, count in maintain().items():
            self.stdout.write(f"{name.replace('_', ' ')}: {count}")
