"""Two processes starting on a new embedded data folder at once (two MCP clients, an MCP client and a CLI command):
both create the database, both migrate it; each must succeed, not fail on the other's catalog rows."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import psycopg
from sqlalchemy.engine import make_url

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.admin import admin_params
from rag_service.db.embedded import _ensure_database
from rag_service.db.engine import make_engine
from rag_service.db.status import schema_is_current
from tests.conftest import DatabaseFactory


def _all_at_once(work: Callable[[], None], times: int) -> list[BaseException]:
    """Run ``work`` on ``times`` threads released together; the errors they raised."""
    start = threading.Barrier(times)
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            work()
        except BaseException as exc:  # the test's subject: any error is a failure
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_concurrent_creates_of_the_database_all_succeed(server_url: str) -> None:
    """A CREATE DATABASE racing another's fails with UniqueViolation, not DuplicateDatabase (a traceback before)."""
    url = make_url(server_url)
    name = f"rag_race_{uuid.uuid4().hex[:10]}"
    try:
        errors = _all_at_once(lambda: _ensure_database(url.query["host"], int(url.query["port"]), name), 4)
        assert errors == []
    finally:
        with psycopg.connect(**admin_params(server_url)) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_concurrent_upgrades_of_a_new_database_all_succeed(
    database_factory: DatabaseFactory, settings: Settings
) -> None:
    url = database_factory.create("rag_race")
    engines = [make_engine(url, settings) for _ in range(2)]
    try:
        free = list(engines)
        errors = _all_at_once(lambda: migrate.upgrade(free.pop()), len(engines))  # list.pop is atomic
        assert errors == []
        assert schema_is_current(engines[0])
    finally:
        for engine in engines:
            engine.dispose()
        database_factory.drop(url)
