"""The caller a task keeps (``core.task_contract.Caller``): taken from the request that
created it, stored in its snapshot (secrets sealed), and restored for its jobs and retries."""

from __future__ import annotations

import pytest
from django.test import override_settings

from mcp_tasks.auth import AccessToken, Principal
from mcp_tasks.core.task_contract import Caller
from mcp_tasks.protocol.request import RequestInfo
from mcp_tasks.tasks.state import service
from tests.support.rows import new_task

TOKEN = AccessToken(token="t-1", client_id="client-9", scopes=["mcp"], claims={"sub": "ada"})


def signed_in_request(headers: dict[str, str | list[str]]) -> RequestInfo:
    return RequestInfo(
        era="modern",
        protocol_version="2026-07-28",
        principal=Principal(scope="client:client-9:ada", access_token=TOKEN),
        client_capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}},
        client_info={"name": "unit", "version": "1"},
        log_level="debug",
        headers=headers,
    )


@override_settings(MCP_TASKS={"SNAPSHOT_HEADERS": ["User-Agent", "x-request-id"]})
def test_a_request_keeps_only_the_allow_listed_string_headers_and_a_token_record() -> None:
    info = signed_in_request(
        {
            "user-agent": "agent/1",
            "x-request-id": ["a", "b"],  # repeated: not one string, not kept
            "authorization": "Bearer t-1",
            "cookie": "sessionid=1",
        }
    )
    caller = info.caller()
    assert caller.headers == {"user-agent": "agent/1"}
    assert caller.access_token == TOKEN.to_record()
    assert AccessToken.from_record(caller.access_token) == TOKEN
    assert (caller.era, caller.protocol_version, caller.log_level) == (
        "modern",
        "2026-07-28",
        "debug",
    )
    assert caller.principal_scope == "client:client-9:ada"
    assert caller.client_id == "client-9"


@pytest.mark.django_db
def test_the_stored_caller_is_the_one_the_task_was_created_with() -> None:
    caller = signed_in_request({"user-agent": "agent/1", "x-request-id": "r-7"}).caller()
    task = new_task(**{field: getattr(caller, field) for field in Caller.__dataclass_fields__})

    task.refresh_from_db()
    assert task.snapshot.sealed and "t-1" not in task.snapshot.sealed  # encrypted at rest
    assert task.client_id == "client-9"
    assert service.stored_caller(task, service.snapshot_secrets(task)) == caller


@pytest.mark.django_db
def test_an_anonymous_caller_without_headers_seals_nothing_and_comes_back_equal() -> None:
    caller = Caller(era="legacy", protocol_version="2025-11-25", principal_scope="anonymous")
    task = new_task(**{field: getattr(caller, field) for field in Caller.__dataclass_fields__})

    assert task.snapshot.sealed == ""
    assert task.client_id == ""
    assert service.stored_caller(task, service.snapshot_secrets(task)) == caller
