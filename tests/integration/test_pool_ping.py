"""Pooled connections are pinged only after sitting idle, and a dead one is replaced without an error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from sqlalchemy import Engine, text

from rag_service.config import Settings
from rag_service.db import engine as engine_module
from rag_service.db.engine import make_engine


@pytest.fixture
def pinged(
    migrated_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Engine, list[int]]]:
    """An engine of one pooled connection whose pings are counted."""
    own = make_engine(migrated_url, replace(settings, pool_size=1, pool_max_overflow=0))
    pings: list[int] = []
    real_ping = own.dialect.do_ping

    def counted(dbapi_connection):  # type: ignore[no-untyped-def]
        pings.append(1)
        return real_ping(dbapi_connection)

    monkeypatch.setattr(own.dialect, "do_ping", counted)
    yield own, pings
    own.dispose()


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_back_a_moment_ago_is_not_pinged(pinged: tuple[Engine, list[int]]) -> None:
    engine, pings = pinged
    first = _backend_pid(engine)
    for _ in range(5):
        assert _backend_pid(engine) == first  # the same pooled connection each time
    assert pings == []


def test_an_idle_connection_is_pinged_and_a_dead_one_replaced(
    pinged: tuple[Engine, list[int]], engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    own, pings = pinged
    first = _backend_pid(own)
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_S", 0.0)  # every connection counts as idle now
    assert _backend_pid(own) == first
    assert pings == [1]  # alive: pinged once, kept

    with engine.connect() as other:  # the server ends the pooled connection while it sits in the pool
        assert other.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": first}).scalar_one()
    replacement = _backend_pid(own)  # no error reaches the caller
    assert replacement != first
    assert len(pings) == 2  # the dead one; its replacement is new, so not pinged
