"""The test suite's own service rules: skip without a service, fail on CI."""

from __future__ import annotations

import pytest

from tests import conftest


def test_missing_service_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "CI", False)
    with pytest.raises(pytest.skip.Exception, match="Redis is not reachable"):
        conftest.service_missing("Redis", "connection refused")


def test_missing_service_fails_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true, so a missing service is a failure"):
        conftest.service_missing("PostgreSQL", "connection refused")


@pytest.mark.redis
def test_redis_answers(redis_url: str) -> None:
    import redis

    assert redis.Redis.from_url(redis_url).ping()


@pytest.mark.postgres
def test_postgresql_answers(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(conftest._with_database(postgres_url, "postgres")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
