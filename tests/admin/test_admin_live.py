"""The live admin's WebSocket consumer (``mcp_tasks.admin.live``): who may connect, and the
events it forwards. Real admin sessions, the configured channel layer (in-memory, or Redis
with ``REDIS_URL``), the task service writing for real."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.db import connections
from django.test import Client, override_settings

from mcp_tasks.admin import events as admin_events, watchers as admin_watchers
from mcp_tasks.admin.live import REFUSED
from mcp_tasks.asgi import admin_live_application, mcp_application
from mcp_tasks.core.db import db
from mcp_tasks.core.groups import task_shard_group
from mcp_tasks.models import Task
from mcp_tasks.tasks.queues import embedded
from mcp_tasks.tasks.state import service
from tests.support.rows import ask, new_task
from tests.support.worker_fixtures import task_id_in_shard_of

pytestmark = pytest.mark.django_db(transaction=True)

LIVE = "/mcp-tasks/admin-live/"
SETTINGS = {"EMBEDDED_WORKER": True, "ADMIN_LIVE_PATH": LIVE}
TIMEOUT = 5


@pytest.fixture(autouse=True)
def live_on() -> Any:
    with override_settings(MCP_TASKS=SETTINGS):
        embedded.connection().flushall()
        yield
        embedded.connection().flushall()


@pytest.fixture(autouse=True)
async def close_thread_connections() -> AsyncIterator[None]:
    """The ORM thread of ``db()`` keeps its connection: close it, or the test database
    cannot be dropped."""
    yield
    await sync_to_async(connections.close_all, thread_sensitive=True)()


def session_cookie(user: User | None) -> bytes:
    if user is None:
        return b""
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def staff(name: str, *perms: str) -> User:
    user = User.objects.create_user(name, is_staff=True)
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="mcp_tasks", codename=codename)
        )
    return user


async def open_socket(
    user: User | None,
    origin: bytes | None = b"http://testserver",
    host: bytes = b"testserver",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> tuple[WebsocketCommunicator, bool, Any]:
    cookie = await sync_to_async(session_cookie)(user)
    headers = [(b"host", host), *(extra or [])]
    if origin is not None:
        headers.append((b"origin", origin))
    if cookie:
        headers.append((b"cookie", cookie))
    application = admin_live_application()
    communicator = WebsocketCommunicator(application, LIVE, headers=headers)
    connected, code = await communicator.connect(timeout=TIMEOUT)
    return communicator, connected, code


@pytest.fixture
async def operator_socket() -> AsyncIterator[WebsocketCommunicator]:
    olga = await sync_to_async(staff)("olga", "view_task", "answer_inputrequest")
    communicator, connected, _ = await open_socket(olga)
    assert connected
    yield communicator
    await communicator.disconnect()


async def next_event(communicator: WebsocketCommunicator) -> dict[str, Any]:
    """The next event other than ``ready`` (sent once, a second after connecting)."""
    while True:
        event: dict[str, Any] = await communicator.receive_json_from(timeout=TIMEOUT)
        if event != {"event": "ready"}:
            return event


# -- who may connect --------------------------------------------------------------------------


async def test_a_visitor_without_a_session_is_refused() -> None:
    _, connected, code = await open_socket(None)
    assert (connected, code) == (False, REFUSED)


async def test_staff_who_may_not_see_tasks_are_refused() -> None:
    nobody = await sync_to_async(staff)("nobody")
    _, connected, code = await open_socket(nobody)
    assert (connected, code) == (False, REFUSED)


async def test_a_user_who_is_not_staff_is_refused() -> None:
    user = await sync_to_async(staff)("nora", "view_task")
    await User.objects.filter(pk=user.pk).aupdate(is_staff=False)
    _, connected, code = await open_socket(user)
    assert (connected, code) == (False, REFUSED)


async def test_another_sites_page_is_refused() -> None:
    olga = await sync_to_async(staff)("olga", "view_task")
    _, connected, _ = await open_socket(olga, origin=b"https://evil.example")
    assert connected is False


@pytest.mark.parametrize(
    "origin",
    [b"https://testserver", b"http://testserver:8000", b"https://testserver:80", None],
    ids=["another scheme", "another port", "the other scheme on this port", "no origin"],
)
async def test_a_page_of_another_origin_on_this_host_is_refused(origin: bytes | None) -> None:
    olga = await sync_to_async(staff)("olga", "view_task")
    _, connected, _ = await open_socket(olga, origin=origin)
    assert connected is False


async def test_a_default_port_written_or_not_is_this_origin() -> None:
    olga = await sync_to_async(staff)("olga", "view_task")
    communicator, connected, _ = await open_socket(olga, origin=b"http://testserver:80")
    assert connected
    await communicator.disconnect()


async def test_a_rebound_domain_outside_allowed_hosts_is_refused() -> None:
    olga = await sync_to_async(staff)("olga", "view_task")
    _, connected, _ = await open_socket(olga, origin=b"http://evil.example", host=b"evil.example")
    assert connected is False


async def test_behind_a_tls_proxy_the_https_page_is_this_origin() -> None:
    olga = await sync_to_async(staff)("olga", "view_task")
    forwarded = [(b"x-forwarded-proto", b"https")]
    with override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
        communicator, connected, _ = await open_socket(
            olga, origin=b"https://testserver", extra=forwarded
        )
        assert connected
        await communicator.disconnect()
        _, connected, _ = await open_socket(olga, origin=b"http://testserver", extra=forwarded)
        assert connected is False


async def test_a_page_of_an_origin_csrf_trusts_is_accepted() -> None:
    olga = await sync_to_async(staff)("olga", "view_task")
    with override_settings(CSRF_TRUSTED_ORIGINS=["https://*.example.com", "https://ops.test"]):
        for origin in (b"https://admin.example.com", b"https://ops.test"):
            communicator, connected, _ = await open_socket(olga, origin=origin)
            assert connected, origin
            await communicator.disconnect()
        _, connected, _ = await open_socket(olga, origin=b"http://admin.example.com")
        assert connected is False


async def test_staff_who_may_view_tasks_are_accepted() -> None:
    viewer = await sync_to_async(staff)("victor", "view_task")
    communicator, connected, _ = await open_socket(viewer)
    assert connected
    await communicator.disconnect()


# -- what it forwards -------------------------------------------------------------------------


async def test_a_new_task_is_announced(operator_socket: WebsocketCommunicator) -> None:
    task = await db(new_task)(principal_scope="user:9")
    assert await next_event(operator_socket) == {"event": "task_created", "task_id": task.id}


async def test_questions_asked_and_answered_are_announced(
    operator_socket: WebsocketCommunicator,
) -> None:
    task = await db(new_task)(principal_scope="user:9")
    await next_event(operator_socket)  # created
    await db(ask)(task, "Proceed?", key="ok")
    events = [await next_event(operator_socket) for _ in range(2)]
    assert {"event": "question_asked", "task_id": task.id} in events
    assert {"event": "task_status_changed", "task_id": task.id} in events
    answered = await db(service.answer)(
        task.id, "ok", {"action": "decline"}, principal_scope=None, answered_by="client"
    )
    assert answered
    events = [await next_event(operator_socket) for _ in range(2)]
    assert {"event": "question_answered", "task_id": task.id} in events


async def test_a_new_log_line_is_announced(operator_socket: WebsocketCommunicator) -> None:
    task = await db(new_task)(principal_scope="user:9")
    await next_event(operator_socket)  # created
    await db(service.add_log)(task.id, "info", "tool", "a line")
    assert await next_event(operator_socket) == {"event": "task_logged", "task_id": task.id}


async def test_progress_reaches_only_pages_that_watch_the_task(
    operator_socket: WebsocketCommunicator,
) -> None:
    watched, other = (
        await db(new_task)(principal_scope="user:9"),
        await db(new_task)(principal_scope="user:9"),
    )
    for _ in range(2):
        await next_event(operator_socket)  # created, created
    await operator_socket.send_json_to({"watch": [watched.id]})
    assert await next_event(operator_socket) == {"event": "watching", "count": 1}
    await db(service.report_progress)(other.id, 1, 4, "other")
    await db(service.report_progress)(watched.id, 2, 4, "half")
    assert await next_event(operator_socket) == {
        "event": "task_changed",
        "task_id": watched.id,
        "status": "working",
    }
    assert await operator_socket.receive_nothing(timeout=0.3)


async def test_a_page_hears_nothing_of_other_tasks_of_the_shards_it_joined(
    operator_socket: WebsocketCommunicator,
) -> None:
    watched = await db(new_task)(principal_scope="user:9")
    await next_event(operator_socket)  # created
    await operator_socket.send_json_to({"watch": [watched.id]})
    await next_event(operator_socket)  # watching
    shard = task_shard_group(watched.id)
    neighbour = task_id_in_shard_of(watched.id)
    layer = get_channel_layer()
    await layer.group_send(shard, {"type": "mcp.task", "task_id": neighbour, "status": "working"})
    assert await operator_socket.receive_nothing(timeout=0.3)
    await layer.group_send(shard, {"type": "mcp.task", "task_id": watched.id, "status": "working"})
    assert await next_event(operator_socket) == {
        "event": "task_changed",
        "task_id": watched.id,
        "status": "working",
    }


async def test_a_page_stops_hearing_of_tasks_it_no_longer_shows(
    operator_socket: WebsocketCommunicator,
) -> None:
    task = await db(new_task)(principal_scope="user:9")
    await next_event(operator_socket)
    await operator_socket.send_json_to({"watch": [task.id]})
    await next_event(operator_socket)
    await operator_socket.send_json_to({"watch": []})
    assert await next_event(operator_socket) == {"event": "watching", "count": 0}
    await db(service.report_progress)(task.id, 1, 4, "quarter")
    assert await operator_socket.receive_nothing(timeout=0.3)


async def test_nonsense_from_the_page_is_ignored(operator_socket: WebsocketCommunicator) -> None:
    await operator_socket.send_json_to(["not", "an", "object"])
    await operator_socket.send_json_to({"watch": "not-a-list"})
    await operator_socket.send_json_to({"watch": [1, None, "x" * 65]})
    assert await next_event(operator_socket) == {"event": "watching", "count": 0}


async def test_frames_that_are_not_json_text_are_ignored(
    operator_socket: WebsocketCommunicator,
) -> None:
    await operator_socket.send_to(text_data="{not json")
    await operator_socket.send_to(text_data="[" * 100_000)
    await operator_socket.send_to(bytes_data=b"\x00\x01")
    await operator_socket.send_json_to({"watch": ["t-1"]})
    assert await next_event(operator_socket) == {"event": "watching", "count": 1}


# -- published only while a page is open -------------------------------------------------------


async def listener() -> tuple[Any, str]:
    """A channel in the live admin's group that no page marked open."""
    from channels.layers import get_channel_layer

    from mcp_tasks.core.groups import ADMIN

    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(ADMIN, channel)
    return layer, channel


async def test_with_no_page_open_nothing_is_published_for_the_live_admin() -> None:
    layer, channel = await listener()
    # One receive throughout: channels_redis's pub/sub layer drops a channel whose receive is
    # cancelled, and what is published before the next receive subscribes again is lost.
    receiving = asyncio.ensure_future(layer.receive(channel))
    await db(new_task)(principal_scope="user:9")
    done, _ = await asyncio.wait({receiving}, timeout=0.3)
    assert not done, receiving.result()
    await sync_to_async(admin_watchers.mark_open)()  # a page opened (in this process)
    task = await db(new_task)(principal_scope="user:9")
    message = await asyncio.wait_for(receiving, TIMEOUT)
    assert message["event"] == "task_created" and message["task_id"] == task.id


async def test_an_open_page_marks_itself_and_is_told_ready_once_every_process_sees_it(
    operator_socket: WebsocketCommunicator,
) -> None:
    assert await operator_socket.receive_json_from(timeout=TIMEOUT) == {"event": "ready"}
    mark = embedded.connection().ttl(admin_watchers._key())  # set before ``ready`` is sent
    assert 0 < mark <= admin_watchers.MARK_LASTS


def test_a_process_that_cannot_read_the_mark_publishes(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable() -> Any:
        raise ConnectionError("Redis is restarting")

    monkeypatch.setattr(admin_watchers, "_connection", unreachable)
    admin_watchers.forget()
    assert admin_watchers.pages_open()


def test_a_process_reads_the_mark_at_most_once_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admin_watchers, "CHECK_EVERY", 60.0)  # however slow this machine
    connection = embedded.connection()
    assert not admin_watchers.pages_open()
    connection.set(admin_watchers._key(), "1")  # another process's page opened
    assert not admin_watchers.pages_open()  # not read again yet
    admin_watchers.forget()  # as CHECK_EVERY later
    assert admin_watchers.pages_open()


# -- routing ----------------------------------------------------------------------------------


def test_without_a_live_path_no_websocket_is_routed() -> None:
    with override_settings(MCP_TASKS={"ADMIN_LIVE_PATH": None}):
        assert admin_live_application() is None
        assert "websocket" not in mcp_application(lambda *a: None).application_mapping


def test_with_a_live_path_mcp_application_routes_the_websocket() -> None:
    assert "websocket" in mcp_application(lambda *a: None).application_mapping


def test_the_live_admin_listens_to_no_signal_of_the_service() -> None:
    """The service announces to the live admin itself: a receiver would count as a listener,
    and a listener makes every task completion in a worker hop to Django's thread."""
    from mcp_tasks import signals

    for signal in (
        signals.task_created,
        signals.task_status_changed,
        signals.task_finished,
        signals.question_answered,
    ):
        assert not signal.has_listeners(Task)


def test_may_announce_is_false_only_when_no_page_is_surely_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admin_watchers, "CHECK_EVERY", 60.0)  # however slow this machine
    admin_watchers.forget()
    assert admin_events.may_announce()  # not read yet: a page may be open
    assert not admin_watchers.pages_open()
    assert not admin_events.may_announce()  # read just now: none
    admin_watchers.mark_open()
    try:
        assert admin_events.may_announce()
        with override_settings(MCP_TASKS={"ADMIN_LIVE_PATH": None}):
            assert not admin_events.may_announce()
    finally:
        admin_watchers._connection().delete(admin_watchers._key())
        admin_watchers.forget()
