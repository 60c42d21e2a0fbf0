"""Settings for the test suite: SQLite unless DATABASE_URL, in-memory layer unless REDIS_URL."""

import os
import uuid
from pathlib import Path

import dj_database_url

SECRET_KEY = "mcp-tasks-tests-not-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]
_CONTRIB = ("admin", "auth", "contenttypes", "sessions", "messages", "staticfiles")
INSTALLED_APPS = ["daphne", *(f"django.contrib.{app}" for app in _CONTRIB), "django_rq"]
INSTALLED_APPS += ["oauth2_provider", "mcp_tasks", "project.demo"]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).resolve().parent.parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or "sqlite://:memory:", conn_max_age=600
    )
}
USE_TZ = True
STATIC_URL = "static/"

REDIS_URL = os.environ.get("REDIS_URL", "")
# One prefix per test run keeps runs (and their live-server subprocesses) apart on one Redis.
REDIS_PREFIX = os.environ.get("REDIS_PREFIX") or f"mcp_tasks_test_{uuid.uuid4().hex[:10]}"
_REDIS_LAYER = {
    "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
    "CONFIG": {"hosts": [REDIS_URL], "prefix": REDIS_PREFIX},
}
_MEMORY_LAYER = {"BACKEND": "channels.layers.InMemoryChannelLayer"}
CHANNEL_LAYERS = {"default": _REDIS_LAYER if REDIS_URL else _MEMORY_LAYER}
RQ_QUEUES = {"mcp_tasks": {"URL": REDIS_URL or "redis://127.0.0.1:6379/15"}}
MCP_TASKS: dict[str, object] = {}

# Django 6.1+ sends mail through named mailers (no default mailer from Django 2028);
# earlier versions ignore this and use EMAIL_BACKEND, which pytest-django sets to locmem.
MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
