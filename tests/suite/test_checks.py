"""System checks: one behaviour per test, each id covered."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.core.checks import CheckMessage
from django.test import override_settings

from mcp_tasks import checks
from mcp_tasks.asgi import mcp_application
from mcp_tasks.checks import workers as worker_checks
from mcp_tasks.conf import DEFAULTS
from mcp_tasks.core.db import SQLITE_OPTIONS

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
PUBSUB_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"
REDIS = {
    "default": {
        "BACKEND": PUBSUB_LAYER,
        "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"]},
    }
}


async def django_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Stands in for ``get_asgi_application()``."""


routed_application = mcp_application(django_app)
unrouted_application = django_app


class Middleware:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.inner(scope, receive, send)


wrapped_application = Middleware(routed_application)


def ids() -> list[str | None]:
    return [message.id for message in run()]


def run() -> list[CheckMessage]:
    return checks.check_mcp_tasks()


# Settings under which the checks report nothing; each test changes one thing.
CLEAN = {
    "ASGI_APPLICATION": "tests.suite.test_checks.routed_application",
    "CHANNEL_LAYERS": REDIS,
    "ALLOWED_HOSTS": ["mcp.example.com"],
    "MCP_TASKS": {},
    "DEBUG": False,
    "RQ": {"WORKER_CLASS": "mcp_tasks.tasks.worker.TaskWorker"},
}


@pytest.fixture(autouse=True)
def clean_settings() -> Any:
    with override_settings(**CLEAN):
        yield


def test_clean_settings_report_nothing() -> None:
    assert run() == []


def test_the_example_project_settings_report_nothing() -> None:
    with override_settings(ASGI_APPLICATION="project.asgi.application", DEBUG=True):
        assert run() == []


# -- E001, E013, E014 ------------------------------------------------------------------------------------


def test_missing_daphne_is_e001() -> None:
    from django.conf import settings

    apps = [app for app in settings.INSTALLED_APPS if app != "daphne"]
    with override_settings(INSTALLED_APPS=apps):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E001"]
    assert "Add 'daphne' at the top of INSTALLED_APPS" in (messages[0].hint or "")


def test_daphne_after_staticfiles_is_e013() -> None:
    from django.conf import settings

    apps = [app for app in settings.INSTALLED_APPS if app != "daphne"] + ["daphne"]
    with override_settings(INSTALLED_APPS=apps):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E013"]
    assert "Move 'daphne' to the top" in (messages[0].hint or "")


def test_unset_asgi_application_is_e014() -> None:
    with override_settings(ASGI_APPLICATION=None):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E014"]
    assert "mcp_application(get_asgi_application())" in (messages[0].hint or "")


# -- E002 ------------------------------------------------------------------------------------


def test_missing_channels_package_is_e002() -> None:
    real = worker_checks.module_available
    with mock.patch.object(
        worker_checks, "module_available", lambda name: name != "channels" and real(name)
    ):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E002"]
    assert "pip install" in (messages[0].hint or "")


# -- E003, E015, E016 ------------------------------------------------------------------------------------


def test_unknown_mcp_tasks_key_is_e003() -> None:
    with override_settings(MCP_TASKS={"ALLOWED_ORIGIN": ["https://app.example.com"]}):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E003"]
    assert "'ALLOWED_ORIGIN'" in messages[0].msg
    assert "Did you mean 'ALLOWED_ORIGINS'?" in (messages[0].hint or "")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("MAX_BODY_BYTES", "4MB"),
        ("MAX_BODY_BYTES", True),
        ("MAX_BODY_BYTES", -1),
        ("ALLOW_ANONYMOUS", "no"),
        ("ALLOWED_ORIGINS", "https://app.example.com"),
        ("PATH", "mcp"),
        ("SERVER_NAME", ""),
        ("TOKEN_VERIFIER", 42),
        ("SSE_KEEPALIVE", "15"),
        ("SNAPSHOT_HEADERS", [b"user-agent"]),
        ("EMBEDDED_WORKER", 1),
        ("TASK_TIMEOUT", None),
        ("MAX_REQUESTS_IN_PROGRESS", 0),
        ("MAX_REQUESTS_IN_PROGRESS", -5),
        ("MAX_REQUESTS_IN_PROGRESS", 10.5),
        ("MAX_REQUESTS_IN_PROGRESS", "100"),
        ("MAX_REQUESTS_IN_PROGRESS", True),
        ("MAX_ACTIVE_TASKS", 0),
        ("MAX_ACTIVE_TASKS", "1000"),
        ("MAX_ACTIVE_TASKS", 2.5),
        ("MAX_ACTIVE_TASKS_PER_CLIENT", -1),
        ("MAX_ACTIVE_TASKS_PER_CLIENT", False),
        ("FAIR_SHARE", "yes"),
        ("RESERVED_SLOTS", -1),
        ("RESERVED_SLOTS", 1.5),
        ("SESSION_CACHE_TTL", -1),
        ("TASK_TTL", float("inf")),  # a deadline past year 9999: every task failed
        ("INPUT_TIMEOUT", 1e12),
        ("SITE_URL", "ops.example.com"),
        ("SITE_URL", "ftp://ops.example.com"),
        ("NOTIFY_RECIPIENTS", "ops@example.com"),
        ("NOTIFY_QUESTIONS", "yes"),
        ("ADMIN_LIVE_PATH", "mcp-tasks/admin-live/"),
        ("ADMIN_REFRESH_INTERVAL", "5"),
    ],
)
def test_wrong_value_type_is_e015(key: str, value: Any) -> None:
    with override_settings(MCP_TASKS={key: value}):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E015"]
    assert repr(key) in messages[0].msg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("MAX_BODY_BYTES", 1024),
        ("SSE_KEEPALIVE", 5),
        ("REQUEST_STATE_TTL", 60.5),
        ("TOKEN_VERIFIER", "myapp.auth.verify_token"),
        ("INSTRUCTIONS", "Use the tools wisely."),
        ("ALLOWED_ORIGINS", ("https://app.example.com",)),
        ("PATH", "/api/mcp"),
        ("TASK_TTL", None),
        ("EMBEDDED_WORKER", True),
        ("MAX_REQUESTS_IN_PROGRESS", 1),
        ("MAX_REQUESTS_IN_PROGRESS", None),
        ("MAX_ACTIVE_TASKS", 1),
        ("MAX_ACTIVE_TASKS", None),
        ("MAX_ACTIVE_TASKS_PER_CLIENT", 50),
        ("FAIR_SHARE", False),
        ("RESERVED_SLOTS", 0),
        ("SESSION_CACHE_TTL", 0),
        ("SITE_URL", "https://ops.example.com"),
        ("NOTIFY_RECIPIENTS", ["ops@example.com"]),
        ("NOTIFY_DIGEST_WINDOW", 0),
        ("ADMIN_LIVE_PATH", "/mcp-tasks/admin-live/"),
        ("ADMIN_LIVE_PATH", None),
        ("ADMIN_REFRESH_INTERVAL", 0.5),
    ],
)
def test_valid_values_pass(key: str, value: Any) -> None:
    with override_settings(MCP_TASKS={key: value}):
        assert run() == []


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_default_passes_its_own_check(key: str) -> None:
    with override_settings(MCP_TASKS={key: DEFAULTS[key]}):
        assert run() == []


def test_mcp_tasks_that_is_not_a_dict_is_e016() -> None:
    with override_settings(MCP_TASKS=["PATH", "/mcp"]):
        assert ids() == ["mcp_tasks.E016"]


# -- E004, E017 ------------------------------------------------------------------------------------


def test_asgi_application_without_the_mcp_route_is_e004() -> None:
    with override_settings(ASGI_APPLICATION="tests.suite.test_checks.unrouted_application"):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E004"]
    assert "mcp_application(get_asgi_application())" in (messages[0].hint or "")


def test_unimportable_asgi_application_is_e017() -> None:
    with override_settings(ASGI_APPLICATION="tests.no_such_module.application"):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E017"]
    assert "could not be imported" in messages[0].msg


def test_route_behind_middleware_is_found() -> None:
    with override_settings(ASGI_APPLICATION="tests.suite.test_checks.wrapped_application"):
        assert run() == []


# -- E005 ------------------------------------------------------------------------------------


def test_missing_channel_layer_is_e005() -> None:
    with override_settings(CHANNEL_LAYERS={}):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E005"]
    assert "channels_redis.pubsub.RedisPubSubChannelLayer" in (messages[0].hint or "")


@pytest.mark.parametrize(
    "layers", [{"default": PUBSUB_LAYER}, {"default": [REDIS["default"]]}, [REDIS]]
)
def test_a_channel_layer_that_is_no_dict_is_e005_not_a_crash(layers: Any) -> None:
    with override_settings(CHANNEL_LAYERS=layers):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E005"]
    assert "a dict with its 'BACKEND'" in messages[0].msg


def test_a_channels_redis_config_that_is_no_dict_is_e019_not_a_crash() -> None:
    layers = {"default": {"BACKEND": PUBSUB_LAYER, "CONFIG": ["redis://127.0.0.1:6379/0"]}}
    with override_settings(CHANNEL_LAYERS=layers):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E019"]
    assert "'CONFIG' must be a dict" in messages[0].msg


def test_channel_layer_alias_comes_from_mcp_tasks() -> None:
    with override_settings(MCP_TASKS={"CHANNEL_LAYER": "mcp"}):
        assert ids() == ["mcp_tasks.E005"]


# -- W001 ------------------------------------------------------------------------------------


# The worker runs in the ASGI process here (an in-process layer cannot reach a worker
# process: W010, below); W001 is about several ASGI processes.
EMBEDDED = {"EMBEDDED_WORKER": True}


def test_in_process_layer_without_debug_is_w001() -> None:
    layers = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=layers, DEBUG=False, MCP_TASKS=EMBEDDED):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W001"]
    assert "SILENCED_SYSTEM_CHECKS" in (messages[0].hint or "")


def test_in_memory_layer_without_debug_is_w001_too() -> None:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY, DEBUG=False, MCP_TASKS=EMBEDDED):
        assert ids() == ["mcp_tasks.W001", "mcp_tasks.W008"]  # W008: not across threads


def test_in_process_layer_with_debug_passes() -> None:
    layers = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=layers, DEBUG=True, MCP_TASKS=EMBEDDED):
        assert run() == []


# -- W003 / W004: channels_redis' RedisChannelLayer -----------------------------------------

CORE_LAYER = "channels_redis.core.RedisChannelLayer"


def core_layer(host: Any) -> dict[str, Any]:
    return {"default": {"BACKEND": CORE_LAYER, "CONFIG": {"hosts": [host]}}}


def test_core_redis_layer_is_w004_pointing_at_the_pubsub_layer() -> None:
    host = {"address": "redis://127.0.0.1:6379/0", "socket_timeout": 15}
    with override_settings(CHANNEL_LAYERS=core_layer(host)):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W004"]
    assert "channels_redis.pubsub.RedisPubSubChannelLayer" in (messages[0].hint or "")


def test_core_redis_host_without_socket_timeout_is_also_w003() -> None:
    with override_settings(CHANNEL_LAYERS=core_layer("redis://127.0.0.1:6379/0")):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W004", "mcp_tasks.W003"]
    assert "socket_timeout" in (messages[1].hint or "")


def test_pubsub_layer_without_socket_timeout_passes() -> None:
    with override_settings(CHANNEL_LAYERS=REDIS):
        assert run() == []


# -- W005: database connections --------------------------------------------------------------

POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "mcp", "HOST": "db"}


@pytest.mark.parametrize(
    "database",
    [{**POSTGRES, "CONN_MAX_AGE": 0}, {**POSTGRES, "CONN_MAX_AGE": 0, "OPTIONS": {}}],
)
def test_postgresql_without_kept_connections_is_w005(database: dict[str, Any]) -> None:
    with mock.patch.dict(settings.DATABASES, {"reports": database}):
        messages = [m for m in run() if m.id == "mcp_tasks.W005"]
    assert len(messages) == 1
    assert "DATABASES['reports']" in messages[0].msg
    assert "CONN_MAX_AGE" in (messages[0].hint or "")


@pytest.mark.parametrize(
    "database",
    [
        {**POSTGRES, "CONN_MAX_AGE": 600},
        {**POSTGRES, "CONN_MAX_AGE": None},
        {**POSTGRES, "CONN_MAX_AGE": 0, "OPTIONS": {"pool": True}},
        {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:", "CONN_MAX_AGE": 0},
    ],
)
def test_kept_connections_or_sqlite_pass_w005(database: dict[str, Any]) -> None:
    with mock.patch.dict(settings.DATABASES, {"reports": database}):
        assert [m for m in run() if m.id == "mcp_tasks.W005"] == []


# -- W002 ------------------------------------------------------------------------------------


def test_wildcard_allowed_hosts_is_w002() -> None:
    with override_settings(ALLOWED_HOSTS=["*"]):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W002"]
    assert "ALLOWED_HOSTS" in (messages[0].hint or "")


def test_wildcard_allowed_hosts_is_w002_even_with_allowed_origins() -> None:
    # Same-origin requests are allowed, and with '*' any rebound domain is "same origin".
    with override_settings(
        ALLOWED_HOSTS=["*"], MCP_TASKS={"ALLOWED_ORIGINS": ["https://app.example.com"]}
    ):
        assert ids() == ["mcp_tasks.W002"]


def test_listed_allowed_hosts_pass() -> None:
    with override_settings(ALLOWED_HOSTS=["mcp.example.com"]):
        assert run() == []


# -- E006: notification mails ------------------------------------------------------------------


def test_notifications_without_a_site_url_is_e006() -> None:
    with override_settings(MCP_TASKS={"NOTIFY_QUESTIONS": True}):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E006"]
    assert "SITE_URL" in (messages[0].hint or "")


def test_notifications_with_a_site_url_pass() -> None:
    settings_dict = {"NOTIFY_QUESTIONS": True, "SITE_URL": "https://ops.example.com"}
    with override_settings(MCP_TASKS=settings_dict):
        assert run() == []


def test_each_problem_has_an_id_of_its_own() -> None:
    """Silencing one problem must not silence another: no id is written twice."""
    import re
    from pathlib import Path

    import mcp_tasks

    package = Path(mcp_tasks.__file__).parent
    written = [
        found
        for module in sorted((package / "checks").glob("*.py"))
        for found in re.findall(r'id="(mcp_tasks\.[EW]\d{3})"', module.read_text())
    ]
    assert written and len(written) == len(set(written)), sorted(written)


def test_checks_are_registered_with_django() -> None:
    from django.core.checks.registry import registry

    assert checks.check_mcp_tasks in registry.get_checks()


# -- E007-E010, W006: OAuth ----------------------------------------------------------------------


def test_dot_verifier_without_oauth2_provider_is_e007() -> None:
    apps_without = [app for app in settings.INSTALLED_APPS if app != "oauth2_provider"]
    with override_settings(
        INSTALLED_APPS=apps_without,
        MCP_TASKS={"TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify"},
    ):
        assert ids() == ["mcp_tasks.E007"]


def test_dot_verifier_with_oauth2_provider_passes() -> None:
    with override_settings(MCP_TASKS={"TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify"}):
        assert run() == []


def test_jwks_verifier_without_issuer_is_e008() -> None:
    with override_settings(
        MCP_TASKS={
            "TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.jwks.verify",
            "JWT_JWKS_URL": "https://issuer.example.com/jwks",
        }
    ):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E008"]
    assert "JWT_ISSUER" in messages[0].msg


def test_jwks_verifier_with_issuer_and_keys_passes() -> None:
    config = {
        "TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.jwks.verify",
        "JWT_ISSUER": "https://issuer.example.com",
        "JWT_JWKS_URL": "https://issuer.example.com/jwks",
    }
    with override_settings(MCP_TASKS=config):
        assert run() == []


@pytest.mark.parametrize("resource", ["mcp.example.com/mcp", "https://mcp.example.com/mcp#x"])
def test_resource_that_is_not_an_absolute_uri_is_e009(resource: str) -> None:
    with override_settings(MCP_TASKS={"RESOURCE": resource}):
        assert ids() == ["mcp_tasks.E009"]


def test_authorization_servers_without_a_verifier_is_e010() -> None:
    with override_settings(MCP_TASKS={"AUTHORIZATION_SERVERS": ["https://auth.example.com"]}):
        assert ids() == ["mcp_tasks.E010"]


def test_plain_http_authorization_server_is_w006() -> None:
    config = {
        "AUTHORIZATION_SERVERS": ["http://auth.example.com"],
        "TOKEN_VERIFIER": "myapp.verify",
    }
    with override_settings(MCP_TASKS=config):
        assert ids() == ["mcp_tasks.W006"]


def test_localhost_http_authorization_server_passes() -> None:
    config = {
        "AUTHORIZATION_SERVERS": ["http://127.0.0.1:8000"],
        "TOKEN_VERIFIER": "myapp.verify",
    }
    with override_settings(MCP_TASKS=config):
        assert run() == []


# -- W014: the CIMD fetcher ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fetcher",
    [None, "oauth2_provider.cimd.SafeMetadataFetcher", "class"],
    ids=["DOT's default", "DOT's by path", "DOT's class"],
)
def test_cimd_fetched_by_dots_own_fetcher_is_w014(fetcher: str | None) -> None:
    from oauth2_provider.cimd import SafeMetadataFetcher

    dot: dict[str, Any] = {"CIMD_ENABLED": True}
    if fetcher is not None:
        dot["CIMD_METADATA_FETCHER"] = SafeMetadataFetcher if fetcher == "class" else fetcher
    with override_settings(OAUTH2_PROVIDER=dot):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W014"]
    assert "mcp_tasks.auth.cimd.BoundedMetadataFetcher" in (messages[0].hint or "")


def test_cimd_fetched_by_the_bounded_fetcher_passes() -> None:
    dot = {
        "CIMD_ENABLED": True,
        "CIMD_METADATA_FETCHER": "mcp_tasks.auth.cimd.BoundedMetadataFetcher",
    }
    with override_settings(OAUTH2_PROVIDER=dot):
        assert run() == []


def test_cimd_off_passes_whatever_the_fetcher() -> None:
    with override_settings(OAUTH2_PROVIDER={"CIMD_ENABLED": False}):
        assert run() == []


def test_the_example_projects_authorization_server_passes() -> None:
    from project import settings as project_settings

    with override_settings(OAUTH2_PROVIDER=project_settings.OAUTH2_PROVIDER):
        assert run() == []


# -- W007 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rq_settings",
    [{}, {"WORKER_CLASS": "rq.worker.SimpleWorker"}, {"WORKER_CLASS": "rq.Worker"}],
    ids=["no worker class", "rq's SimpleWorker", "rq's Worker"],
)
def test_a_worker_class_that_takes_no_task_jobs_is_w007(rq_settings: dict[str, Any]) -> None:
    with override_settings(RQ=rq_settings):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W007"]
    assert "stay 'Queued'" in messages[0].msg
    assert "mcp_tasks.tasks.worker.TaskWorker" in (messages[0].hint or "")


def test_an_unimportable_worker_class_is_w007() -> None:
    with override_settings(RQ={"WORKER_CLASS": "myproject.workers.Missing"}):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W007"]
    assert "cannot be imported" in messages[0].msg


@pytest.mark.parametrize(
    "worker_class",
    [
        "mcp_tasks.tasks.worker.TaskWorker",
        "mcp_tasks.tasks.worker.ForkingTaskWorker",
        "mcp_tasks.tasks.worker.EmbeddedTaskWorker",
    ],
)
def test_task_worker_classes_pass_w007(worker_class: str) -> None:
    with override_settings(RQ={"WORKER_CLASS": worker_class}):
        assert run() == []


def test_the_embedded_worker_needs_no_worker_class() -> None:
    with override_settings(RQ={}, MCP_TASKS={"EMBEDDED_WORKER": True}):
        assert "mcp_tasks.W007" not in ids()


# -- E011: embedded mode's packages ----------------------------------------------------------


@pytest.mark.parametrize("module", ["fakeredis", "lupa"])
def test_embedded_worker_without_its_packages_is_e011(module: str) -> None:
    real = worker_checks.module_available
    with (
        mock.patch.object(
            worker_checks, "module_available", lambda name: name != module and real(name)
        ),
        override_settings(MCP_TASKS={"EMBEDDED_WORKER": True}),
    ):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E011"]
    assert module in messages[0].msg
    assert 'pip install "django-mcp-tasks[embedded]"' in (messages[0].hint or "")


def test_missing_embedded_packages_pass_outside_embedded_mode() -> None:
    real = worker_checks.module_available
    with mock.patch.object(
        worker_checks,
        "module_available",
        lambda name: name not in ("fakeredis", "lupa") and real(name),
    ):
        assert run() == []


def test_embedded_worker_with_its_packages_passes() -> None:
    with override_settings(MCP_TASKS={"EMBEDDED_WORKER": True}):
        assert run() == []


# -- W008, W010: the channel layer task workers use ----------------------------------------

IN_PROCESS = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}


def test_channels_in_memory_layer_with_the_embedded_worker_is_w008() -> None:
    with override_settings(
        CHANNEL_LAYERS=IN_MEMORY, DEBUG=True, MCP_TASKS={"EMBEDDED_WORKER": True}
    ):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W008"]
    assert "mcp_tasks.layers.InProcessChannelLayer" in (messages[0].hint or "")


def test_the_in_process_layer_with_the_embedded_worker_passes() -> None:
    with override_settings(
        CHANNEL_LAYERS=IN_PROCESS, DEBUG=True, MCP_TASKS={"EMBEDDED_WORKER": True}
    ):
        assert run() == []


@pytest.mark.parametrize("layers", [IN_MEMORY, IN_PROCESS], ids=["in-memory", "in-process"])
def test_an_in_process_layer_with_worker_processes_is_w010(layers: dict[str, Any]) -> None:
    with override_settings(CHANNEL_LAYERS=layers, DEBUG=True):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W010"]
    assert "RedisPubSubChannelLayer" in (messages[0].hint or "")


# -- E012: the queues tasks go to -----------------------------------------------------------


def test_a_task_queue_missing_from_rq_queues_is_e012() -> None:
    with override_settings(RQ_QUEUES={}):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E012"]
    assert "'mcp_tasks'" in messages[0].msg and "TASK_QUEUE" in messages[0].msg


def test_a_tools_queue_missing_from_rq_queues_is_e012() -> None:
    from mcp_tasks import TaskConfig
    from mcp_tasks.authoring.registry import mcp

    with mock.patch.dict(mcp.tools):

        @mcp.tool(name="export", task=TaskConfig(queue="reports"))
        def export() -> str:
            return "exported"

        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E012"]
    assert "'reports'" in messages[0].msg and "tool 'export'" in messages[0].msg
    assert "rqworker reports" in (messages[0].hint or "")


def test_queues_need_no_rq_queues_in_embedded_mode() -> None:
    with override_settings(RQ_QUEUES={}, MCP_TASKS={"EMBEDDED_WORKER": True}):
        assert "mcp_tasks.E012" not in ids()


# -- E019, W016: Redis Sentinel, for every Redis user -------------------------------------------

SENTINELS = [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26379)]
RQ_ON_SENTINEL = {
    "mcp_tasks": {"SENTINELS": SENTINELS, "MASTER_NAME": "mymaster", "SOCKET_TIMEOUT": 10}
}
LAYER_HOST_ON_SENTINEL = {"sentinels": SENTINELS, "master_name": "mymaster", "socket_timeout": 10}


def layer_on(*hosts: Any) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": list(hosts)},
        }
    }


def test_every_redis_user_on_one_sentinel_service_passes() -> None:
    with override_settings(
        RQ_QUEUES=RQ_ON_SENTINEL, CHANNEL_LAYERS=layer_on(LAYER_HOST_ON_SENTINEL)
    ):
        assert run() == []


@pytest.mark.parametrize(
    ("rq_queues", "hosts", "where"),
    [
        ({"mcp_tasks": {"SENTINELS": SENTINELS}}, [LAYER_HOST_ON_SENTINEL], "no MASTER_NAME"),
        ({"mcp_tasks": {"MASTER_NAME": "mymaster"}}, [LAYER_HOST_ON_SENTINEL], "no SENTINELS"),
        (
            {"mcp_tasks": {"URL": "redis://r:6379/0", "MASTER_NAME": "mymaster"}},
            ["redis://r:6379/0"],
            "a URL and Sentinel keys",
        ),
        (RQ_ON_SENTINEL, [{"sentinels": SENTINELS}], "no master_name"),
        (RQ_ON_SENTINEL, [{"master_name": "mymaster"}], "no list of (host, port) sentinels"),
        (
            {"mcp_tasks": {"SENTINELS": ["10.0.0.1:26379"], "MASTER_NAME": "mymaster"}},
            [LAYER_HOST_ON_SENTINEL],
            "not a list of (host, port) pairs",
        ),
    ],
    ids=[
        "rq: sentinels without master",
        "rq: master without sentinels",
        "rq: url and master",
        "layer: sentinels without master",
        "layer: master without sentinels",
        "rq: sentinels as strings",
    ],
)
def test_a_redis_setting_that_cannot_work_is_e019(
    rq_queues: dict[str, Any], hosts: list[Any], where: str
) -> None:
    with override_settings(RQ_QUEUES=rq_queues, CHANNEL_LAYERS=layer_on(*hosts)):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.E019"]
    assert where in messages[0].msg


def test_sentinel_for_the_queue_and_a_fixed_address_for_the_layer_is_w016() -> None:
    layer = layer_on("redis://user:secret@r:6379/0")
    with override_settings(RQ_QUEUES=RQ_ON_SENTINEL, CHANNEL_LAYERS=layer):
        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W016"]
    assert "RQ_QUEUES['mcp_tasks']: Sentinel service 'mymaster'" in messages[0].msg
    assert "CHANNEL_LAYERS['default'] host 1: the fixed address redis://r:6379/0" in messages[0].msg
    assert "secret" not in messages[0].msg


def test_a_fixed_address_for_the_queue_and_sentinel_for_the_layer_is_w016_too() -> None:
    queues = {"mcp_tasks": {"URL": "redis://r:6379/0"}}
    with override_settings(RQ_QUEUES=queues, CHANNEL_LAYERS=layer_on(LAYER_HOST_ON_SENTINEL)):
        assert ids() == ["mcp_tasks.W016"]


def test_two_sentinel_services_is_w016() -> None:
    other = {**LAYER_HOST_ON_SENTINEL, "master_name": "other"}
    with override_settings(RQ_QUEUES=RQ_ON_SENTINEL, CHANNEL_LAYERS=layer_on(other)):
        assert ids() == ["mcp_tasks.W016"]


def test_a_tools_queue_on_a_fixed_address_beside_sentinel_is_w016() -> None:
    from mcp_tasks import TaskConfig
    from mcp_tasks.authoring.registry import mcp

    queues = {**RQ_ON_SENTINEL, "reports": {"URL": "redis://r:6379/0"}}
    with (
        override_settings(RQ_QUEUES=queues, CHANNEL_LAYERS=layer_on(LAYER_HOST_ON_SENTINEL)),
        mock.patch.dict(mcp.tools),
    ):

        @mcp.tool(name="export", task=TaskConfig(queue="reports"))
        def export() -> str:
            return "exported"

        messages = run()
    assert [m.id for m in messages] == ["mcp_tasks.W016"]
    assert "RQ_QUEUES['reports']" in messages[0].msg


def test_embedded_mode_checks_only_the_channel_layer() -> None:
    broken = {"mcp_tasks": {"SENTINELS": SENTINELS}}  # unused in embedded mode
    with override_settings(
        RQ_QUEUES=broken,
        CHANNEL_LAYERS=layer_on(LAYER_HOST_ON_SENTINEL),
        MCP_TASKS={"EMBEDDED_WORKER": True},
    ):
        assert not {"mcp_tasks.E019", "mcp_tasks.W016"} & set(ids())


def test_the_example_project_on_sentinel_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``REDIS_SENTINELS`` gives the queue and the layer the same Sentinel service."""
    import importlib
    import sys

    monkeypatch.setenv("REDIS_SENTINELS", "10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379")
    monkeypatch.setenv("REDIS_MASTER_NAME", "mcp")
    monkeypatch.delenv("REDIS_URL", raising=False)
    saved = sys.modules.pop("project.settings", None)
    try:
        example = importlib.import_module("project.settings")
    finally:
        if saved is not None:
            sys.modules["project.settings"] = saved
    assert example.RQ_QUEUES["mcp_tasks"]["SENTINELS"] == SENTINELS
    with override_settings(
        RQ_QUEUES=example.RQ_QUEUES,
        CHANNEL_LAYERS=example.CHANNEL_LAYERS,
        MCP_TASKS={"EMBEDDED_WORKER": example.MCP_TASKS["EMBEDDED_WORKER"]},
    ):
        assert run() == []


# -- W009: SQLite under several threads -----------------------------------------------------

SQLITE_FILE = {"ENGINE": "django.db.backends.sqlite3", "NAME": "/srv/app/db.sqlite3"}


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        {"init_command": "PRAGMA journal_mode=WAL"},
    ],
    ids=["none", "no WAL", "WAL only"],
)
def test_a_sqlite_file_without_the_options_a_worker_needs_is_w009(options: dict[str, Any]) -> None:
    with mock.patch.dict(settings.DATABASES, {"default": {**SQLITE_FILE, "OPTIONS": options}}):
        messages = worker_checks._check_sqlite()
    assert [m.id for m in messages] == ["mcp_tasks.W009"]
    assert "IMMEDIATE" in (messages[0].hint or "") and "journal_mode=WAL" in (
        messages[0].hint or ""
    )


def test_a_sqlite_file_with_the_options_passes_w009() -> None:
    database = {**SQLITE_FILE, "OPTIONS": dict(SQLITE_OPTIONS)}
    with mock.patch.dict(settings.DATABASES, {"default": database}):
        assert worker_checks._check_sqlite() == []


def test_an_in_memory_sqlite_database_passes_w009() -> None:
    database = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    with mock.patch.dict(settings.DATABASES, {"default": database}):
        assert worker_checks._check_sqlite() == []
