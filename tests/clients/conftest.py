"""The task-client modules' stack: one live server and one rq worker per module, on the
module's own Redis (``stack``). Their tasks all end (or park) before the test does, so a test
never waits behind another's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import LiveServer
from tests.support.worker_fixtures import RedisProcess, TaskStack, module_redis, module_task_stack


@pytest.fixture(scope="module")
def client_redis(request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    yield from module_redis(request, f"{request.module.__name__} redis")


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, client_redis: RedisProcess) -> Iterator[TaskStack]:
    yield from module_task_stack(request, client_redis, label=request.module.__name__)


@pytest.fixture
def stack(request: pytest.FixtureRequest, module_stack: TaskStack) -> LiveServer:
    module_stack.attach(request)
    return module_stack.server
