"""Embedded mode (no REDIS_URL): the dev server runs tasks on an in-process fake Redis with a
worker thread, and behaves like the real thing (cooperative cancel).

The tests share one embedded-mode server; every task a test starts ends before it does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.worker_fixtures import ListenStream, capabilities, wait_for_path

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("open_gates")]


@pytest.fixture
def client(server: Any, task_client: Any) -> Any:
    return task_client(server)


def test_embedded_server_has_no_redis(server: Any) -> None:
    assert "REDIS_URL" not in server.env


def test_embedded_task_runs_to_completion_in_the_server_process(client: Any, server: Any) -> None:
    task_id = client.start("context_probe")["taskId"]
    task = client.wait_terminal(task_id)
    assert task["status"] == "completed"
    seen = json.loads(task["result"]["content"][0]["text"])
    assert seen["pid"] == server.process.pid
    assert seen["is_background_task"] is True and seen["task_id"] == task_id


def test_embedded_trivial_task_result(client: Any) -> None:
    task_id = client.start("trivial_task", {"n": 12})["taskId"]
    task = client.wait_terminal(task_id)
    assert task["result"]["structuredContent"] == {"result": 12}


@pytest.mark.cancel
def test_embedded_cancel_is_cooperative(client: Any, tmp_path: Path) -> None:
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "cancelled"), "the tool never saw CancelledError"
    assert not (tmp_path / "finished").exists()
    assert client.get(task_id)["status"] == "cancelled"


@pytest.mark.cancel
def test_embedded_worker_keeps_running_after_a_cancel(client: Any, tmp_path: Path) -> None:
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "cancelled")
    follow_up = client.start("trivial_task", {"n": 1})["taskId"]
    assert client.wait_terminal(follow_up)["status"] == "completed"


def test_embedded_input_required_task_is_answered_through_tasks_update(
    task_client: Any, server: Any
) -> None:
    client = task_client(server, caps=capabilities(elicitation=True))
    task_id = client.start("confirm_delete", {"filename": "a.txt"})["taskId"]
    task = client.wait_for(task_id, "input_required")
    (key,) = task["inputRequests"]
    client.update(task_id, {key: {"action": "accept", "content": {"confirm": True}}})
    assert client.wait_terminal(task_id)["result"]["content"][0]["text"] == "Deleted a.txt."


def test_embedded_listen_pushes_task_notifications(client: Any, tmp_path: Path) -> None:
    task_id = client.start("gated_task", {"marker_dir": str(tmp_path)})["taskId"]
    with ListenStream(client, {"taskIds": [task_id]}) as stream:
        assert stream.next()["params"]["notifications"]["taskIds"] == [task_id]
        (tmp_path / "gate").touch()
        seen = stream.until(
            lambda m: (
                m.get("method") == "notifications/tasks" and m["params"]["status"] == "completed"
            )
        )
    assert seen[-1]["params"]["result"]["content"][0]["text"] == "gate opened after two of five"


def test_the_embedded_worker_starts_after_the_channel_layer_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Channels caches a layer without a lock: made in two threads at once, an in-process
    layer splits in two, and the worker listens on the one nobody sends to. The layer is
    made before the first worker thread starts."""
    import threading

    from channels.layers import channel_layers

    from mcp_tasks.tasks.queues import embedded
    from mcp_tasks.tasks.worker import embedded_worker

    seen: list[bool] = []

    class Recorded(threading.Thread):
        def start(self) -> None:
            seen.append("default" in channel_layers.backends)

    monkeypatch.setattr(embedded, "threads", [])
    # No thread runs here: the database (in memory when this file runs alone) is not used.
    monkeypatch.setattr(embedded_worker, "refuse_in_memory_database", lambda: None)
    monkeypatch.setattr(threading, "Thread", Recorded)
    monkeypatch.delitem(channel_layers.backends, "default", raising=False)
    embedded_worker.start_worker(["mcp_tasks"])
    assert seen == [True]
