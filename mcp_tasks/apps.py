from __future__ import annotations

from django.apps import AppConfig, apps
from django.core.signals import setting_changed


class McpTasksConfig(AppConfig):
    name = "mcp_tasks"
    verbose_name = "MCP tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, conf  # noqa: F401  (importing checks registers them)

        setting_changed.connect(conf.reset_config, dispatch_uid="mcp_tasks.conf.reset_config")
        from .tasks.state import outbox, question_mail

        question_mail.connect()
        setting_changed.connect(question_mail.connect, dispatch_uid="mcp_tasks.notifications")
        from .metrics import switch

        switch.connect()  # MCP_TASKS["METRICS"]: imports prometheus_client only when on
        setting_changed.connect(switch.connect, dispatch_uid="mcp_tasks.metrics")
        from .tracing import switch as tracing

        tracing.connect()  # MCP_TASKS["TRACING"]: imports opentelemetry only when on
        setting_changed.connect(tracing.connect, dispatch_uid="mcp_tasks.tracing")
        if apps.is_installed("django.contrib.admin"):  # the live admin hears the service
            from .admin import events, rq_dashboard, watchers

            outbox.install_announcer(events)
            rq_dashboard.follow_embedded_mode()  # when django_rq's admin came after ours
            setting_changed.connect(watchers.forget, dispatch_uid="mcp_tasks.admin.watchers")
        from .tasks.queues.layer_publish import forget_publishers_on_change

        setting_changed.connect(
            forget_publishers_on_change, dispatch_uid="mcp_tasks.tasks.queues.layer_publish"
        )
        if apps.is_installed("django_rq"):
            from .tasks.queues.loop_redis import forget_clients_on_change
            from .tasks.queues.queue import forget_queues

            setting_changed.connect(forget_queues, dispatch_uid="mcp_tasks.tasks.queues.queue")
            setting_changed.connect(
                forget_clients_on_change, dispatch_uid="mcp_tasks.tasks.queues.loop_redis"
            )
