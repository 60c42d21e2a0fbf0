"""Rows: legacy-era sessions (background tasks add their own models)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class LegacySession(models.Model):
    """A 2025-era ``Mcp-Session-Id`` session, so that any ASGI process can serve it."""

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    principal_scope = models.CharField(max_length=255, db_index=True)
    protocol_version = models.CharField(max_length=16)
    client_info = models.JSONField(default=dict, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, blank=True, default="")
    subscriptions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name = "legacy session"
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        name = self.client_info.get("name", "client") if isinstance(self.client_info, dict) else "client"
        return f"{name} session {self.id[:8]}…"
