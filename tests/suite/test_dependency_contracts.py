"""Contracts of the dependencies' private and undocumented API that mcp_tasks relies on.

mcp_tasks subclasses rq's workers and uvicorn's HTTP protocols, replays redis-py pipelines,
reads Django's database backend internals and imports helpers that are not documented
public API. Each such dependency is pinned to the minor releases checked here (pyproject.toml,
``[project] dependencies``, the ``uvicorn`` extra, and the ``oauth`` extra for the example
project's authorization views); these tests check every name the code
uses, the call shapes it uses them with, and that the installed version is inside the pinned
range, so a new minor release fails here, in CI, rather than in production. The contract of
the mcp SDK is ``tests/protocol/test_sdk_contract.py``.

Fast: no servers (fakeredis where Redis data is needed, Django backends that never connect).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import signal
import tomllib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from rq import Queue
from rq.command import PUBSUB_CHANNEL_TEMPLATE, parse_payload, send_stop_job_command
from rq.defaults import RQ_KEY_PREFIX
from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE, Execution, ExecutionRegistry
from rq.job import Job, JobStatus
from rq.utils import as_text, now, utcformat
from rq.worker import BaseWorker, Worker, WorkerStatus

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
JOB_FUNCTION = "mcp_tasks.tasks.worker.job.run_task"


# -- helpers ---------------------------------------------------------------------------------


def pinned(distribution: str, extra: str | None = None, group: str | None = None) -> SpecifierSet:
    """The version range of ``distribution`` in pyproject.toml: ``[project] dependencies``,
    the optional dependencies ``extra``, or the repository's dependency group ``group``."""
    pyproject = tomllib.loads(PYPROJECT.read_text())
    project = pyproject["project"]
    if group is not None:
        lines = [line for line in pyproject["dependency-groups"][group] if isinstance(line, str)]
    else:
        lines = (
            project["dependencies"] if extra is None else project["optional-dependencies"][extra]
        )
    found = [
        Requirement(line)
        for line in lines
        if canonicalize_name(Requirement(line).name) == canonicalize_name(distribution)
    ]
    assert len(found) == 1, f"{distribution} is listed {len(found)} times in {PYPROJECT.name}"
    return found[0].specifier


def assert_pinned(
    distribution: str, checked: str, extra: str | None = None, group: str | None = None
) -> None:
    """pyproject.toml pins ``distribution`` to ``checked`` (the range these contracts were
    checked against), with an upper bound, and the installed version is inside it."""
    where = (
        f"the {group!r} dependency group"
        if group
        else f"the {extra!r} extra"
        if extra
        else "[project] dependencies"
    )
    specifier = pinned(distribution, extra, group)
    assert specifier == SpecifierSet(checked), (
        f"{where} pins {distribution}{specifier}, but its contract tests were checked against "
        f"{distribution}{checked}: re-check the contract, then update both"
    )
    assert any(spec.operator == "<" for spec in specifier), f"{distribution} has no upper bound"
    installed = version(distribution)
    assert specifier.contains(installed, prereleases=True), (
        f"{distribution} {installed} is installed, outside the pinned range {specifier}"
    )


def parameters(function: Callable[..., Any]) -> list[str]:
    """The parameter names of ``function`` (``self`` included for a method of a class)."""
    return list(inspect.signature(function).parameters)


def assert_accepts(function: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``function`` can be called with these arguments (its signature binds them)."""
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError as error:
        pytest.fail(
            f"{function.__qualname__}{inspect.signature(function)} refuses the call: {error}"
        )


def plain(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A pool's connection arguments that are plain values (not the retry policy, the pool
    itself or other objects each pool makes its own)."""
    return {
        key: value
        for key, value in kwargs.items()
        if value is None or isinstance(value, (str, int, float, bool, tuple))
    }


@pytest.fixture
def fake_redis() -> Iterator[fakeredis.FakeStrictRedis]:
    """A client of a new in-process fake Redis server."""
    client = fakeredis.FakeStrictRedis(server=fakeredis.FakeServer())
    yield client
    client.close()


# -- rq ----------------------------------------------------------------------------------------


class TestRq:
    """tasks/worker.py, tasks/rq_bookkeeping.py, tasks/queue.py, tasks/loop_redis.py."""

    CHECKED = ">=3.0,<3.1"

    #: rq worker methods the task workers override, with the parameters (after ``self``)
    #: rq calls them with: the overrides take the same ones.
    HOOKS: dict[str, list[str]] = {
        "dequeue_job_and_maintain_ttl": ["timeout", "max_idle_time"],
        "execute_job": ["job", "queue"],
        "set_state": ["state", "pipeline"],
        "check_for_suspension": ["burst"],
        "heartbeat": ["timeout", "pipeline"],
        "handle_payload": ["message"],
        "_shutdown": [],
        "request_force_stop": ["signum", "frame"],
        "request_stop": ["signum", "frame"],
        "teardown": [],
        "_install_signal_handlers": [],
        "run_maintenance_tasks": [],
        "maintain_heartbeats": ["job", "execution"],
        "serialize": [],
    }

    #: Every rq name mcp_tasks imports, by module.
    IMPORTED: list[tuple[str, str]] = [
        ("rq", "Queue"),
        ("rq.command", "parse_payload"),
        ("rq.command", "send_stop_job_command"),
        ("rq.defaults", "RQ_KEY_PREFIX"),
        ("rq.exceptions", "InvalidJobOperation"),
        ("rq.exceptions", "NoSuchJobError"),
        ("rq.exceptions", "StopRequested"),
        ("rq.executions", "Execution"),
        ("rq.executions", "ExecutionRegistry"),
        ("rq.executions", "WORKER_EXECUTIONS_KEY_TEMPLATE"),
        ("rq.job", "Job"),
        ("rq.job", "JobStatus"),
        ("rq.utils", "as_text"),
        ("rq.utils", "now"),
        ("rq.utils", "utcformat"),
        ("rq.worker", "BaseWorker"),
        ("rq.worker", "Worker"),
        ("rq.worker", "WorkerStatus"),
    ]

    @staticmethod
    def worker(connection: Any) -> BaseWorker:
        return BaseWorker(["mcp_tasks"], connection=connection, prepare_for_work=False)

    @staticmethod
    def task_job(connection: Any) -> Job:
        """A job made as tasks/queue.py makes a task's job."""
        return Job.create(
            JOB_FUNCTION,
            args=("task-id", 0),
            id="mcp_tasks-task-id-0",
            connection=connection,
            timeout=60,
            result_ttl=0,
            failure_ttl=24 * 3600,
            description="mcp_tasks tool task-id",
            origin="mcp_tasks",
        )

    def test_installed_rq_is_inside_the_pinned_range(self) -> None:
        assert_pinned("rq", self.CHECKED)

    @pytest.mark.parametrize(("module", "name"), IMPORTED)
    def test_rq_module_exports_the_name_mcp_tasks_imports(self, module: str, name: str) -> None:
        assert hasattr(importlib.import_module(module), name), f"{module}.{name} is gone"

    def test_rq_worker_has_finalize_success_taking_job_queue_execution_return_value(self) -> None:
        assert parameters(BaseWorker._finalize_success) == [
            "self",
            "job",
            "queue",
            "execution",
            "return_value",
        ]

    def test_rq_worker_has_finalize_failure_taking_job_queue_execution_exc_info(self) -> None:
        assert parameters(BaseWorker._finalize_failure) == [
            "self",
            "job",
            "queue",
            "execution",
            "exc_info",
        ]

    def test_rq_worker_registers_with_the_hash_serialize_gives_and_a_birth(
        self, fake_redis: Any
    ) -> None:
        """tasks/queue.py tells task workers from others by a field serialize adds, and
        counts a registration alive by its ``birth``."""
        worker = Worker(["mcp_tasks"], connection=fake_redis)
        worker.serialize = lambda: {**Worker.serialize(worker), "marker": "1"}  # type: ignore[method-assign]
        worker.register_birth()  # type: ignore[no-untyped-call]
        assert fake_redis.hget(worker.key, "marker") == b"1"
        assert fake_redis.hget(worker.key, "birth") is not None

    def test_rq_worker_has_maintain_heartbeats_taking_job_and_execution(self) -> None:
        assert parameters(BaseWorker.maintain_heartbeats) == ["self", "job", "execution"]

    @pytest.mark.parametrize("worker_class", [BaseWorker, Worker], ids=["BaseWorker", "Worker"])
    @pytest.mark.parametrize(("hook", "expected"), HOOKS.items(), ids=list(HOOKS))
    def test_rq_worker_hook_takes_the_parameters_the_task_workers_override_it_with(
        self, worker_class: type[BaseWorker], hook: str, expected: list[str]
    ) -> None:
        method = getattr(worker_class, hook, None)
        assert callable(method), f"rq's {worker_class.__name__}.{hook} is gone: an override is dead"
        assert parameters(method) == ["self", *expected]

    def test_rq_forking_worker_reports_a_killed_work_horse_with_job_pid_status_rusage(
        self,
    ) -> None:
        assert parameters(Worker.handle_work_horse_killed) == [
            "self",
            "job",
            "retpid",
            "ret_val",
            "rusage",
        ]

    def test_rq_worker_takes_maintenance_interval_and_works_without_scheduler_quietly(
        self,
    ) -> None:
        assert_accepts(BaseWorker, ["mcp_tasks"], connection=None, maintenance_interval=30)
        assert_accepts(BaseWorker.bootstrap, object())
        assert_accepts(BaseWorker.work, object(), with_scheduler=False, logging_level="WARNING")

    def test_rq_worker_has_the_attributes_the_task_worker_reads(self, fake_redis: Any) -> None:
        worker = self.worker(fake_redis)
        assert isinstance(inspect.getattr_static(BaseWorker, "dequeue_timeout"), property)
        assert isinstance(
            inspect.getattr_static(BaseWorker, "should_run_maintenance_tasks"), property
        )
        assert isinstance(worker.dequeue_timeout, int)
        assert isinstance(worker.exponential_backoff_factor, float)
        assert isinstance(worker.max_connection_wait_time, float)
        assert isinstance(worker.job_monitoring_interval, int)
        assert isinstance(worker.maintenance_interval, int)
        assert worker.job_class is Job
        assert [queue.name for queue in worker.queues] == ["mcp_tasks"]
        assert worker.get_redis_server_version() >= (5, 0, 0)  # type: ignore[no-untyped-call]

    def test_rq_worker_starts_with_state_stop_flag_shutdown_date_and_executions(
        self, fake_redis: Any
    ) -> None:
        worker = self.worker(fake_redis)
        assert worker._state == "starting"
        assert worker._stop_requested is False
        assert worker._shutdown_requested_date is None
        assert worker.executions == {}

    def test_rq_worker_state_is_the_state_attribute_the_bookkeeping_sets(
        self, fake_redis: Any
    ) -> None:
        worker = self.worker(fake_redis)
        worker._state = WorkerStatus.BUSY
        assert worker.get_state() == WorkerStatus.BUSY
        with fake_redis.pipeline() as pipeline:
            worker.set_state(WorkerStatus.IDLE, pipeline)
        assert worker._state == WorkerStatus.IDLE

    def test_rq_worker_execution_is_read_from_the_executions_dict(self, fake_redis: Any) -> None:
        worker = self.worker(fake_redis)
        execution = Execution("execution-id", "job-id", fake_redis, worker.name)
        worker.executions[execution.id] = execution
        assert worker.execution is execution

    def test_rq_request_stop_records_the_date_then_calls_shutdown(self, fake_redis: Any) -> None:
        seen: list[datetime | None] = []

        class Recording(BaseWorker):
            def handle_warm_shutdown_request(self) -> None:
                return None

            def _shutdown(self) -> None:
                seen.append(self._shutdown_requested_date)

        worker = Recording(["mcp_tasks"], connection=fake_redis, prepare_for_work=False)
        handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            worker.request_stop(signal.SIGTERM, None)  # type: ignore[no-untyped-call]
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
        assert len(seen) == 1 and seen[0] is not None
        assert (now() - seen[0]).total_seconds() < 60

    def test_rq_set_shutdown_requested_date_writes_it_to_the_worker_hash(
        self, fake_redis: Any
    ) -> None:
        worker = self.worker(fake_redis)
        worker._shutdown_requested_date = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
        worker.set_shutdown_requested_date()  # type: ignore[no-untyped-call]
        written = fake_redis.hget(worker.key, "shutdown_requested_date")
        assert as_text(written) == utcformat(worker._shutdown_requested_date)

    def test_rq_work_loop_installs_signal_handlers_and_watches_the_stop_flag(self) -> None:
        # EmbeddedTaskWorker replaces _install_signal_handlers; its request_stop only sets
        # _stop_requested, which rq's loop must read.
        source = inspect.getsource(BaseWorker.work)
        assert "self._install_signal_handlers()" in source
        assert "self._stop_requested" in source

    def test_rq_job_status_without_refresh_is_the_status_attribute_set_directly(
        self, fake_redis: Any
    ) -> None:
        job = self.task_job(fake_redis)
        job._status = JobStatus.STARTED
        assert job.get_status(refresh=False) == JobStatus.STARTED

    def test_rq_execution_takes_id_job_id_connection_worker_name_and_keeps_its_job(
        self, fake_redis: Any
    ) -> None:
        job = self.task_job(fake_redis)
        execution = Execution("execution-id", job.id, fake_redis, "worker-name")
        assert (execution.id, execution.job_id, execution.worker_name) == (
            "execution-id",
            job.id,
            "worker-name",
        )
        execution.created_at = execution.last_heartbeat = now()
        execution._job = job
        assert execution.job is job  # not fetched from Redis

    def test_rq_keys_are_the_ones_the_bookkeeping_script_writes(self, fake_redis: Any) -> None:
        worker = self.worker(fake_redis)
        queue = worker.queues[0]
        job = self.task_job(fake_redis)
        execution = Execution("execution-id", job.id, fake_redis, worker.name)
        assert execution.key == f"{RQ_KEY_PREFIX}:execution:{job.id}:execution-id"
        assert (
            ExecutionRegistry.key_template.format(job.id) == f"{RQ_KEY_PREFIX}:executions:{job.id}"
        )
        assert WORKER_EXECUTIONS_KEY_TEMPLATE.format(worker.name) == worker.executions_key
        assert worker.job_class.redis_job_namespace_prefix + job.id == job.key
        assert job.started_job_registry.key == queue.started_job_registry.key
        assert queue.intermediate_queue_key not in (queue.key, "")
        assert isinstance(job.dependents_key, str) and isinstance(job.dependencies_key, str)

    def test_rq_execution_hash_has_the_fields_the_bookkeeping_script_writes(
        self, fake_redis: Any
    ) -> None:
        execution = Execution("execution-id", "job-id", fake_redis, "worker-name")
        assert set(execution.serialize()) == {
            "id",
            "job_id",
            "created_at",
            "last_heartbeat",
            "worker_name",
        }

    def test_rq_status_values_are_the_strings_the_scripts_write(self) -> None:
        assert JobStatus.QUEUED.value == "queued"
        assert JobStatus.STARTED.value == "started"
        assert WorkerStatus.BUSY.value == "busy"
        assert WorkerStatus.IDLE.value == "idle"

    def test_rq_job_restore_reads_a_job_hash_as_redis_returns_it(self, fake_redis: Any) -> None:
        job = self.task_job(fake_redis)
        job.save()
        raw = fake_redis.hgetall(job.key)
        restored = BaseWorker.job_class(job.id, connection=fake_redis, serializer=None)
        restored.restore(raw)
        assert (restored.func_name, restored.args, restored.origin) == (
            JOB_FUNCTION,
            ("task-id", 0),
            "mcp_tasks",
        )
        assert (restored.timeout, restored.result_ttl) == (60, 0)
        for attribute in ("redis_server_version", "worker_name", "last_heartbeat", "started_at"):
            assert hasattr(restored, attribute), f"rq's Job has no {attribute}"

    def test_rq_job_create_takes_the_task_job_arguments(self) -> None:
        assert_accepts(
            Job.create,
            JOB_FUNCTION,
            args=("task-id", 0),
            id="mcp_tasks-task-id-0",
            connection=None,
            timeout=60,
            result_ttl=0,
            failure_ttl=3600,
            description="",
            origin="mcp_tasks",
        )

    def test_rq_enqueue_job_into_a_pipeline_only_stages_its_commands(self, fake_redis: Any) -> None:
        # tasks/queue.py's stage_enqueue sends those commands later, from an event loop.
        queue = Queue("mcp_tasks", connection=fake_redis)
        pipeline = fake_redis.pipeline()
        queue.enqueue_job(self.task_job(fake_redis), pipeline=pipeline)
        assert pipeline.command_stack, "rq wrote nothing into the pipeline"
        assert fake_redis.llen(queue.key) == 0, "rq sent the job itself"
        # stage_enqueue swaps rq's one push to its list for the fair queue's.
        pushes = [
            args
            for args, _ in pipeline.command_stack
            if args[0] in ("RPUSH", "LPUSH") and args[1] == queue.key
        ]
        assert pushes == [("RPUSH", queue.key, "mcp_tasks-task-id-0")]
        pipeline.execute()
        assert [as_text(job_id) for job_id in fake_redis.lrange(queue.key, 0, -1)] == [
            "mcp_tasks-task-id-0"
        ]

    def test_rq_queue_keeps_the_redis_version_once_asked(self, fake_redis: Any) -> None:
        queue = Queue("mcp_tasks", connection=fake_redis)
        assert not queue.redis_server_version
        queue.get_redis_server_version()
        assert queue.redis_server_version

    def test_rq_stop_job_command_parses_to_stop_job_with_the_job_id(self, fake_redis: Any) -> None:
        job = self.task_job(fake_redis)
        job.worker_name = "worker-name"
        job.save()
        pubsub = fake_redis.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(PUBSUB_CHANNEL_TEMPLATE % "worker-name")
        try:
            send_stop_job_command(fake_redis, job.id)
            message = None
            for _ in range(10):  # the subscription's own message comes first (ignored: None)
                message = pubsub.get_message(timeout=0.1)
                if message is not None:
                    break
        finally:
            pubsub.close()
        assert message is not None
        assert parse_payload(message) == {"command": "stop-job", "job_id": job.id}

    def test_rq_utils_read_text_and_write_dates_as_the_scripts_do(self) -> None:
        assert as_text(b"job-id") == "job-id"
        offset = now().utcoffset()  # rq's clock is aware, in UTC
        assert offset is not None and offset.total_seconds() == 0
        moment = datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
        assert utcformat(moment) == "2025-01-02T03:04:05.000006Z"


# -- redis-py ----------------------------------------------------------------------------------


class TestRedis:
    """tasks/queue.py (``pipeline.command_stack``) and tasks/loop_redis.py."""

    CHECKED = ">=5.0.1,<8.2"

    def test_installed_redis_is_inside_the_pinned_range(self) -> None:
        assert_pinned("redis", self.CHECKED)

    async def test_redis_sync_pipeline_commands_replay_in_an_async_pipeline(self) -> None:
        server = fakeredis.FakeServer()
        staging = redis.Redis().pipeline()  # records only: never connects
        staging.hset("job", mapping={"status": "queued"})
        staging.rpush("queue", "job")
        commands = list(staging.command_stack)
        assert commands == [
            (("HSET", "job", "status", "queued"), {}),
            (("RPUSH", "queue", "job"), {}),
        ]
        client = fakeredis.FakeAsyncRedis(server=server)
        try:
            async with client.pipeline(transaction=True) as pipeline:
                pipeline.command_stack.extend(commands)
                await pipeline.execute()
        finally:
            await client.aclose()
        reader = fakeredis.FakeStrictRedis(server=server)
        assert reader.hget("job", "status") == b"queued"
        assert reader.lrange("queue", 0, -1) == [b"job"]

    @pytest.mark.parametrize(
        ("url", "connection_class"),
        [
            ("redis://redis.example:6380/2", redis.connection.Connection),
            ("rediss://redis.example:6380/2", redis.connection.SSLConnection),
            ("unix:///run/redis.sock?db=2", redis.connection.UnixDomainSocketConnection),
        ],
    )
    def test_redis_pool_exposes_its_connection_class_and_kwargs(
        self, url: str, connection_class: type[Any]
    ) -> None:
        client = redis.Redis.from_url(url, socket_timeout=15)
        pool = client.connection_pool
        assert type(pool) is redis.ConnectionPool
        assert pool.connection_class is connection_class
        assert pool.connection_kwargs["db"] == 2
        assert pool.connection_kwargs["socket_timeout"] == 15

    def test_redis_pool_kwargs_hold_the_connect_callback(self) -> None:
        def callback(connection: Any = None) -> None:
            return None

        pool = redis.Redis(redis_connect_func=callback).connection_pool
        assert pool.connection_kwargs["redis_connect_func"] is callback


# -- uvicorn -----------------------------------------------------------------------------------


class TestUvicorn:
    """contrib/uvicorn_http.py subclasses uvicorn's HTTP protocols (``--http``)."""

    CHECKED = ">=0.30,<0.56"

    class Transport(asyncio.Transport):
        """A transport of no socket."""

        def __init__(self) -> None:
            super().__init__({"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 5000)})
            self.closed = False

        def close(self) -> None:
            self.closed = True

        def is_closing(self) -> bool:
            return self.closed

    @staticmethod
    def protocol_classes() -> list[tuple[type[Any], type[Any]]]:
        """``(uvicorn's protocol, mcp_tasks' subclass)`` pairs."""
        from uvicorn.protocols.http.h11_impl import H11Protocol
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        from mcp_tasks.contrib import uvicorn_http

        return [
            (H11Protocol, uvicorn_http.H11Protocol),
            (HttpToolsProtocol, uvicorn_http.HttpToolsProtocol),
        ]

    @staticmethod
    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    def test_installed_uvicorn_is_inside_the_pinned_range_of_both_extras(self) -> None:
        assert_pinned("uvicorn", self.CHECKED, extra="uvicorn")

    def test_uvicorn_protocols_take_config_server_state_app_state_and_loop(self) -> None:
        for base, _ in self.protocol_classes():
            assert parameters(base) == ["config", "server_state", "app_state", "_loop"], base

    def test_uvicorn_protocols_leave_the_refusal_names_to_the_mixin(self) -> None:
        for base, _ in self.protocol_classes():
            for name in ("_refused", "_refuse_queue"):
                assert not hasattr(base, name), f"{base.__qualname__} now has {name}"

    async def test_uvicorn_protocol_built_as_the_server_builds_it_serves_a_connection(
        self,
    ) -> None:
        import uvicorn
        from uvicorn.server import ServerState

        config = uvicorn.Config(self.app, log_config=None)
        for _, protocol_class in self.protocol_classes():
            state, app_state = ServerState(), {"key": "value"}
            protocol = protocol_class(config=config, server_state=state, app_state=app_state)
            assert (protocol.config, protocol.server_state, protocol.app_state) == (
                config,
                state,
                app_state,
            )
            transport = self.Transport()
            protocol.connection_made(transport)
            assert protocol.transport is transport
            assert "_refused" not in vars(protocol)
            assert not transport.closed  # served, not refused
            assert parameters(protocol.data_received) == ["data"]
            protocol.eof_received()
            protocol.connection_lost(None)

    def test_uvicorn_loads_the_http_protocol_from_an_import_string(self) -> None:
        import uvicorn

        from mcp_tasks.contrib.uvicorn_http import HttpToolsProtocol

        config = uvicorn.Config(
            self.app, http="mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol", log_config=None
        )
        config.load()
        assert config.http_protocol_class is HttpToolsProtocol


# -- channels ----------------------------------------------------------------------------------


class TestChannels:
    """transport/consumer.py, layers.py, checks/__init__.py (E017), asgi.py."""

    CHECKED = ">=4.2,<4.4"

    def test_installed_channels_is_inside_the_pinned_range(self) -> None:
        assert_pinned("channels", self.CHECKED)

    def test_channels_get_handler_name_turns_a_message_type_into_a_method_name(self) -> None:
        from channels.consumer import get_handler_name

        assert get_handler_name({"type": "http.request"}) == "http_request"
        assert get_handler_name({"type": "mcp.task_event"}) == "mcp_task_event"

    def test_channels_get_handler_name_refuses_a_leading_underscore(self) -> None:
        from channels.consumer import get_handler_name

        with pytest.raises(ValueError):
            get_handler_name({"type": "._private"})
        with pytest.raises(ValueError):
            get_handler_name({})

    def test_channels_async_consumer_dispatches_one_message(self) -> None:
        from channels.consumer import AsyncConsumer

        assert parameters(AsyncConsumer.dispatch) == ["self", "message"]
        assert parameters(AsyncConsumer.__call__) == ["self", "scope", "receive", "send"]

    def test_channels_router_exposes_its_mapping_and_takes_an_attribute(self) -> None:
        from channels.routing import ProtocolTypeRouter

        mapping = {"http": object()}
        router = ProtocolTypeRouter(mapping)
        assert router.application_mapping is mapping
        router.mcp_tasks_path = "/mcp"  # mcp_tasks.asgi marks its router so
        assert router.mcp_tasks_path == "/mcp"

    def test_channels_middleware_exposes_the_application_it_wraps(self) -> None:
        from channels.auth import AuthMiddlewareStack
        from channels.security.websocket import AllowedHostsOriginValidator

        inner = object()
        # checks/__init__.py follows "inner" and "application" (at most 6 levels) to find mcp_tasks.
        found, app, depth = False, AllowedHostsOriginValidator(AuthMiddlewareStack(inner)), 0
        while app is not None and depth <= 6:
            if app is inner:
                found = True
                break
            app = getattr(app, "inner", None) or getattr(app, "application", None)
            depth += 1
        assert found, "the wrapped application cannot be reached through inner/application"

    def test_channels_in_memory_layer_leaves_loop_and_home_to_the_subclass(self) -> None:
        from channels.layers import InMemoryChannelLayer

        layer = InMemoryChannelLayer()
        assert not hasattr(layer, "_loop"), "InProcessChannelLayer's _loop would replace it"
        assert not hasattr(layer, "_home"), "InProcessChannelLayer's _home would replace it"
        assert not hasattr(layer, "_store"), "InProcessChannelLayer's _store would replace it"
        expected = {
            "send": ["self", "channel", "message"],
            "receive": ["self", "channel"],
            "new_channel": ["self", "prefix"],
            "group_add": ["self", "group", "channel"],
            "group_discard": ["self", "group", "channel"],
            "group_send": ["self", "group", "message"],
            "flush": ["self"],
        }
        for name, names in expected.items():
            assert parameters(getattr(InMemoryChannelLayer, name)) == names, name
        # InProcessChannelLayer takes the same options and keys its shared store by them.
        assert parameters(InMemoryChannelLayer.__init__) == [
            "self",
            "expiry",
            "group_expiry",
            "capacity",
            "channel_capacity",
            "kwargs",
        ]


# -- channels_redis ----------------------------------------------------------------------------


class TestChannelsRedis:
    """core/redis_clients.py reads the layer's ``hosts`` as channels_redis does
    (``channels_redis.utils.decode_hosts`` and ``create_pool``, undocumented: the format of
    the hosts is its documented settings) to make the process bus's client of the same
    Redis, a fixed address or a Sentinel service."""

    CHECKED = ">=4.2,<4.4"

    def test_installed_channels_redis_is_inside_the_pinned_range(self) -> None:
        assert_pinned("channels-redis", self.CHECKED)

    @pytest.mark.parametrize(
        "host",
        [
            "redis://redis.example:6380/3",
            {"address": "redis://redis.example:6380/3", "socket_timeout": 15},
            ("redis.example", 6380),
        ],
    )
    def test_a_fixed_address_is_read_as_channels_redis_reads_it(self, host: Any) -> None:
        from channels_redis.utils import create_pool, decode_hosts

        from mcp_tasks.core import redis_clients

        theirs = create_pool(decode_hosts([host])[0])
        ours = redis_clients.async_client(redis_clients.host_target(host, "host 1"))
        assert type(ours.connection_pool) is type(theirs)
        assert ours.connection_pool.connection_kwargs["retry"] is not None  # ours retries
        assert plain(ours.connection_pool.connection_kwargs) == plain(theirs.connection_kwargs)

    def test_a_sentinel_service_is_read_as_channels_redis_reads_it(self) -> None:
        from channels_redis.utils import create_pool, decode_hosts

        from mcp_tasks.core import redis_clients

        host = {
            "sentinels": [("s1.example", 26379), ("s2.example", 26380)],
            "master_name": "mymaster",
            "sentinel_kwargs": {"password": "sentinel-secret"},
            "db": 2,
            "socket_timeout": 10,
        }
        theirs = create_pool(decode_hosts([host])[0])
        ours = redis_clients.async_client(redis_clients.host_target(host, "host 1")).connection_pool
        assert isinstance(theirs, redis.asyncio.sentinel.SentinelConnectionPool)
        assert type(ours) is type(theirs)
        assert (ours.service_name, ours.is_master) == (theirs.service_name, theirs.is_master)
        assert ours.connection_kwargs["retry"] is not None
        assert plain(ours.connection_kwargs) == plain(theirs.connection_kwargs)
        for manager in (ours.sentinel_manager, theirs.sentinel_manager):
            addresses = [
                (
                    s.connection_pool.connection_kwargs["host"],
                    s.connection_pool.connection_kwargs["port"],
                )
                for s in manager.sentinels
            ]
            assert addresses == [("s1.example", 26379), ("s2.example", 26380)]
            assert manager.sentinel_kwargs == {"password": "sentinel-secret"}

    @pytest.mark.parametrize("config", [{"prefix": "site"}, {}])
    def test_a_group_message_is_published_where_and_as_the_pubsub_layer_publishes_it(
        self, config: dict[str, Any]
    ) -> None:
        """tasks/queues/layer_publish.py publishes to the group's channel as the private
        ``RedisPubSubLoopLayer._get_group_channel_name`` names it, with the layer's default
        prefix, what the layer's public ``serialize`` gives."""
        from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer

        from mcp_tasks.tasks.queues import layer_publish

        default = inspect.signature(RedisPubSubLoopLayer).parameters["prefix"].default
        assert default == layer_publish.DEFAULT_PREFIX
        layer = RedisPubSubChannelLayer(hosts=["redis://redis.example:6380"], **config)
        message = {"type": "mcp.task", "task_id": "t", "fields": {"n": 1}}

        async def theirs() -> str:
            return str(layer._get_layer()._get_group_channel_name("mcp_tasks.tasks.7"))

        prefix = config.get("prefix", layer_publish.DEFAULT_PREFIX)
        ours = layer_publish.group_channel(prefix, "mcp_tasks.tasks.7")
        assert ours == asyncio.run(theirs())
        assert layer.deserialize(layer.serialize(message)) == message


# -- django-rq ---------------------------------------------------------------------------------


class TestDjangoRq:
    """admin.py links to django-rq's dashboard by its URL names; core/redis_clients.py
    reads ``RQ_QUEUES`` entries as django-rq does (``connection_utils.get_redis_connection``,
    the keys its README documents) for the async client of a queue."""

    CHECKED = ">=3,<4.3"

    def test_installed_django_rq_is_inside_the_pinned_range(self) -> None:
        assert_pinned("django-rq", self.CHECKED)

    @pytest.mark.parametrize(
        "config",
        [
            {"URL": "redis://user:secret@redis.example:6380/2?client_name=mcp"},
            {"URL": "redis://redis.example:6380", "DB": 4},
            {"HOST": "redis.example", "PORT": 6380, "DB": 1, "PASSWORD": "secret"},
            {"UNIX_SOCKET_PATH": "/run/redis.sock", "DB": 3},
        ],
    )
    def test_a_fixed_address_is_read_as_django_rq_reads_it(self, config: dict[str, Any]) -> None:
        from django_rq.connection_utils import get_redis_connection

        from mcp_tasks.core import redis_clients

        theirs = get_redis_connection(config).connection_pool
        ours = redis_clients.async_client(redis_clients.rq_target(config, "q")).connection_pool
        assert ours.connection_class.__name__ == theirs.connection_class.__name__
        carried = ("host", "port", "path", "db", "username", "password", "client_name")
        for name in carried:
            assert ours.connection_kwargs.get(name) == theirs.connection_kwargs.get(name), name

    def test_a_sentinel_service_is_read_as_django_rq_reads_it(self) -> None:
        from django_rq.connection_utils import get_redis_connection

        from mcp_tasks.core import redis_clients

        config = {
            "SENTINELS": [("s1.example", 26379), ("s2.example", 26380)],
            "MASTER_NAME": "mymaster",
            "DB": 2,
            "PASSWORD": "secret",
            "SOCKET_TIMEOUT": 10,
            "CONNECTION_KWARGS": {"socket_connect_timeout": 3},
            "SENTINEL_KWARGS": {"password": "sentinel-secret"},
        }
        theirs = get_redis_connection(config).connection_pool
        ours = redis_clients.async_client(redis_clients.rq_target(config, "q")).connection_pool
        assert isinstance(theirs, redis.sentinel.SentinelConnectionPool)
        assert isinstance(ours, redis.asyncio.sentinel.SentinelConnectionPool)
        assert (ours.service_name, ours.is_master) == (theirs.service_name, theirs.is_master)
        for name in ("db", "password", "username", "socket_timeout", "socket_connect_timeout"):
            assert ours.connection_kwargs.get(name) == theirs.connection_kwargs.get(name), name
        for manager in (ours.sentinel_manager, theirs.sentinel_manager):
            addresses = [
                (
                    s.connection_pool.connection_kwargs["host"],
                    s.connection_pool.connection_kwargs["port"],
                )
                for s in manager.sentinels
            ]
            assert addresses == [("s1.example", 26379), ("s2.example", 26380)]
            assert manager.sentinel_kwargs == {"password": "sentinel-secret"}

    def test_django_rq_dashboard_url_names_reverse(self) -> None:
        from django.urls import reverse

        # The test URLconf (project.urls) includes django_rq.urls, and django-rq 4 also
        # mounts the dashboard in the admin; admin.queue_dashboard_url tries both names.
        assert reverse("django_rq:home")
        assert reverse("admin:django_rq_home")

    def test_django_rq_lists_its_dashboard_as_a_model_admin_of_url_patterns(self) -> None:
        """admin/rq_dashboard.py registers django-rq's ModelAdmin of ``Dashboard`` again,
        a subclass that wraps the views of its ``get_urls()``."""
        from django.contrib import admin
        from django.urls import URLPattern
        from django_rq.admin import QueueAdmin
        from django_rq.models import Dashboard

        registered = admin.site.get_model_admin(Dashboard)
        assert isinstance(registered, QueueAdmin)
        patterns = registered.get_urls()  # type: ignore[no-untyped-call]
        assert all(isinstance(pattern, URLPattern) for pattern in patterns)


# -- Django ------------------------------------------------------------------------------------


class TestDjango:
    """db.py, tasks/rows.py, tasks/loop_database.py, transport/http.py, admin*.py, apps.py,
    signals.py. CI runs them on the newest minor release of the range too (noxfile.py)."""

    CHECKED = ">=5.2,<6.2"

    @staticmethod
    def wrapper(engine: str = "django.db.backends.sqlite3", **settings: Any) -> Any:
        """A database wrapper of its own (never connected), as ``connections[alias]``."""
        from django.db.utils import ConnectionHandler

        return ConnectionHandler({"default": {"ENGINE": engine, **settings}})["default"]

    def test_installed_django_is_inside_the_pinned_range(self) -> None:
        assert_pinned("django", self.CHECKED)

    @pytest.mark.parametrize(
        ("module", "name"),
        [
            ("django.db.backends.base.base", "BaseDatabaseWrapper"),
            ("django.db.backends.utils", "CursorWrapper"),
            ("django.db.backends.postgresql.psycopg_any", "is_psycopg3"),
            ("django.http.request", "split_domain_port"),
            ("django.http.request", "validate_host"),
            ("django.contrib.admin.utils", "flatten_fieldsets"),
            ("django.contrib.admin.utils", "quote"),
            ("django.contrib.admin.utils", "unquote"),
            ("django.contrib.admin.helpers", "AdminForm"),
            ("django.contrib.admin.helpers", "AdminErrorList"),
            ("django.core.signals", "setting_changed"),
            ("django.forms.fields", "InvalidJSONInput"),
        ],
    )
    def test_django_module_exports_the_name_mcp_tasks_imports(self, module: str, name: str) -> None:
        if "postgresql" in module:
            pytest.importorskip("psycopg")
        assert hasattr(importlib.import_module(module), name), f"{module}.{name} is gone"

    def test_django_json_field_shows_invalid_input_as_typed(self) -> None:
        """admin/forms.py's StorableJSONField hands refused JSON back as ``InvalidJSONInput``,
        which ``JSONField.prepare_value`` shows as typed (not JSON-encoded again)."""
        from django import forms
        from django.forms.fields import InvalidJSONInput

        field = forms.JSONField()
        bound = field.bound_data("{not json", None)
        assert isinstance(bound, InvalidJSONInput)
        assert field.prepare_value(InvalidJSONInput('"\\u0000"')) == '"\\u0000"'

    def test_django_health_check_done_skips_the_ping_before_a_query(self) -> None:
        wrapper = self.wrapper(CONN_HEALTH_CHECKS=True)
        pings: list[bool] = []

        def is_usable() -> bool:
            pings.append(True)
            return True

        wrapper.is_usable = is_usable
        wrapper.connection = object()  # as if connected
        wrapper.health_check_enabled = True
        try:
            wrapper.health_check_done = True
            wrapper.close_if_health_check_failed()
            assert pings == []
            wrapper.health_check_done = False
            wrapper.close_if_health_check_failed()
            assert pings == [True]
            assert wrapper.health_check_done is True
        finally:
            wrapper.connection = None

    def test_django_connections_all_initialized_only_lists_the_opened_aliases(self) -> None:
        from django.db.utils import ConnectionHandler

        sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
        handler = ConnectionHandler({"default": sqlite, "other": sqlite})
        assert handler.all(initialized_only=True) == []
        opened = handler["other"]
        assert handler.all(initialized_only=True) == [opened]
        assert len(handler.all()) == 2

    def test_django_wrapper_wraps_a_raw_cursor_for_logging_and_not(self) -> None:
        from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

        wrapper = self.wrapper()
        raw = object()
        wrapped = wrapper.make_cursor(raw)
        assert type(wrapped) is CursorWrapper and wrapped.cursor is raw
        debug = wrapper.make_debug_cursor(raw)
        assert isinstance(debug, CursorDebugWrapper) and debug.cursor is raw
        assert wrapper.queries_logged is False
        wrapper.force_debug_cursor = True
        assert wrapper.queries_logged is True
        assert wrapper.connection is None  # the raw DB-API connection, once connected

    def test_django_postgresql_wrapper_makes_debug_cursors_from_a_raw_cursor(self) -> None:
        pytest.importorskip("psycopg")
        from django.db.backends.postgresql.base import DatabaseWrapper

        assert parameters(DatabaseWrapper.make_debug_cursor) == ["self", "cursor"]
        assert parameters(DatabaseWrapper.make_cursor) == ["self", "cursor"]

    def test_django_postgresql_connection_params_are_accepted_by_psycopg_async_connect(
        self,
    ) -> None:
        psycopg = pytest.importorskip("psycopg")
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        assert is_psycopg3 is True
        wrapper = self.wrapper(
            "django.db.backends.postgresql",
            NAME="mcp",
            USER="user",
            PASSWORD="secret",
            HOST="db.example",
            PORT="5433",
            OPTIONS={"assume_role": "mcp_role", "sslmode": "prefer"},
        )
        params = dict(wrapper.get_connection_params())
        assert "assume_role" not in params  # not a libpq parameter
        assert wrapper.settings_dict["OPTIONS"]["assume_role"] == "mcp_role"
        params.pop("cursor_factory", None)  # as tasks/loop_database.py does
        connect = inspect.signature(psycopg.AsyncConnection.connect).parameters
        libpq = {k: v for k, v in params.items() if k not in connect}
        assert {"context", "prepare_threshold"} <= set(params) - set(libpq)
        psycopg.conninfo.make_conninfo("", **libpq)  # raises on a keyword libpq does not know

    def test_django_model_meta_lists_the_concrete_fields_in_column_order(self) -> None:
        from django.contrib.auth.models import Group, Permission

        assert [field.attname for field in Group._meta.concrete_fields] == ["id", "name"]
        assert [field.column for field in Permission._meta.concrete_fields] == [
            "id",
            "name",
            "content_type_id",
            "codename",
        ]

    def test_django_field_and_backend_give_column_expressions_and_converters(self) -> None:
        from django.contrib.auth.models import Group

        wrapper = self.wrapper()
        field = Group._meta.get_field("name")
        column = field.get_col("t")
        assert (column.alias, column.target) == ("t", field)
        assert isinstance(wrapper.ops.get_db_converters(column), list)
        assert isinstance(field.get_db_converters(wrapper), list)
        assert wrapper.ops.quote_name("t") == '"t"'
        assert isinstance(wrapper.features.has_select_for_update, bool)

    def test_django_split_domain_port_and_validate_host_check_a_host_header(self) -> None:
        from django.http.request import split_domain_port, validate_host

        assert split_domain_port("MCP.example:8000") == ("mcp.example", "8000")
        assert split_domain_port("[::1]:8000") == ("[::1]", "8000")
        assert split_domain_port("bad host") == ("", "")
        assert validate_host("mcp.example", [".example"])
        assert not validate_host("mcp.example", ["other.example"])

    def test_django_admin_utils_quote_unquote_and_flatten_fieldsets(self) -> None:
        from django.contrib.admin.utils import flatten_fieldsets, quote, unquote

        assert quote("a/b_c") == "a_2Fb_5Fc"
        assert unquote(quote("a/b_c")) == "a/b_c"
        fieldsets: Any = [(None, {"fields": ["a", ("b", "c")]}), ("More", {"fields": ["d"]})]
        assert flatten_fieldsets(fieldsets) == ["a", "b", "c", "d"]

    def test_django_admin_form_and_error_list_wrap_a_plain_form(self) -> None:
        from django import forms
        from django.contrib.admin.helpers import AdminErrorList, AdminForm

        class Answer(forms.Form):
            answer = forms.CharField()

        form: Any = Answer(data={})  # the admin helpers are typed for ModelForms only
        admin_form: Any = AdminForm(form, [("Your answer", {"fields": ["answer"]})], {})
        assert [fieldset.name for fieldset in admin_form] == ["Your answer"]
        assert list(AdminErrorList(form, [])) == list(form.errors.values())

    def test_django_core_setting_changed_is_the_signal_override_settings_sends(self) -> None:
        from django.core import signals
        from django.test import signals as test_signals

        assert signals.setting_changed is test_signals.setting_changed

    def test_django_signal_takes_use_caching(self) -> None:
        from django.dispatch import Signal

        assert Signal(use_caching=True).use_caching is True


class TestDjangoOAuthToolkit:
    """What ``project/views.py`` (the example authorization server: RFC 8707
    ``invalid_target``, RFC 9207 ``iss`` on error redirects, the consent page's client host)
    overrides and calls on django-oauth-toolkit's views, and the private helpers of
    ``oauth2_provider.cimd`` that ``mcp_tasks/auth/cimd.py`` (the bounded CIMD fetcher) keeps
    DOT's rules with, which DOT does not document."""

    CHECKED = ">=3.4,<3.5"

    def test_installed_dot_is_inside_the_pinned_range(self) -> None:
        assert_pinned("django-oauth-toolkit", self.CHECKED, extra="oauth")

    def test_authorization_view_methods_the_example_overrides_and_calls(self) -> None:
        from oauth2_provider.views import AuthorizationView

        assert parameters(AuthorizationView.redirect) == ["self", "redirect_to", "application"]
        assert parameters(AuthorizationView.validate_authorization_request) == ["self", "request"]
        assert parameters(AuthorizationView.error_response)[:3] == ["self", "error", "application"]
        assert parameters(AuthorizationView.form_valid) == ["self", "form"]
        assert parameters(AuthorizationView.render_to_response)[:2] == ["self", "context"]

    def test_the_issuer_setting_and_helper_of_rfc_9207(self) -> None:
        from oauth2_provider.settings import oauth2_settings

        assert isinstance(oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS, bool)
        assert parameters(oauth2_settings.oauth2_authorization_server_issuer) == ["request"]

    def test_application_knows_its_registration_source_and_redirect_uris(self) -> None:
        from oauth2_provider.models import get_application_model

        application = get_application_model()
        assert "registration_source" in {field.name for field in application._meta.get_fields()}
        assert parameters(application.redirect_uri_allowed) == ["self", "uri"]

    def test_cimd_validate_client_id_url_parses_a_client_id_and_refuses_bad_ones(self) -> None:
        from oauth2_provider.cimd import CIMDError, _validate_client_id_url

        parsed = _validate_client_id_url("https://[2001:db8::1]:8443/c/app.json?v=2")
        assert (parsed.hostname, parsed.port) == ("2001:db8::1", 8443)
        assert (parsed.netloc, parsed.path, parsed.query) == (
            "[2001:db8::1]:8443",
            "/c/app.json",
            "v=2",
        )
        for refused in ("http://a.example/c.json", "https://a.example/c/../d.json"):
            with pytest.raises(CIMDError):
                _validate_client_id_url(refused)

    def test_cimd_ip_is_public_refuses_internal_addresses_in_every_form(self) -> None:
        from oauth2_provider.cimd import _ip_is_public

        internal = ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "::ffff:127.0.0.1"]
        internal += ["64:ff9b::a9fe:a9fe", "fe80::1"]
        assert [ip for ip in internal if _ip_is_public(ip)] == []
        assert _ip_is_public("93.184.215.14") is True
        assert _ip_is_public("2606:2800:21f:cb07:6820:80da:af6b:8b2c") is True

    def test_cimd_effective_max_age_clamps_cache_control_to_the_settings(self) -> None:
        from django.test import override_settings
        from oauth2_provider.cimd import _effective_max_age

        bounds = {"CIMD_METADATA_MIN_AGE_SECONDS": 300, "CIMD_METADATA_MAX_AGE_SECONDS": 86400}
        with override_settings(OAUTH2_PROVIDER=bounds):
            assert _effective_max_age("public, max-age=600") == 600
            assert _effective_max_age("max-age=5") == 300
            assert _effective_max_age("no-store") == 300
            assert _effective_max_age(None) == 86400


class TestOtlpProtoCommon:
    """What ``tests/support/trace_export.py`` (the benchmarks' traced server) calls in the
    OTLP exporters' shared encoder, which OpenTelemetry does not document."""

    CHECKED = ">=1.45,<1.46"

    def test_installed_encoder_is_inside_the_pinned_range(self) -> None:
        assert_pinned("opentelemetry-exporter-otlp-proto-common", self.CHECKED, group="test")

    def test_encode_spans_takes_the_spans_and_gives_a_protobuf_message(self) -> None:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        assert parameters(encode_spans) == ["sdk_spans"]
        assert isinstance(encode_spans([]).SerializeToString(), bytes)
