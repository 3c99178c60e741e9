"""The embedded server's log (``<pgdata>/log``, appended to by every start, checkpoint and failed statement) stays
bounded: a process that starts or joins the server rolls it over (``rag_service.db.server_log``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rag_service.db import server_log
from rag_service.db.embedded import start_embedded_server
from tests.conftest import TEST_DATA_DIR

LIMIT = 64 * 1024


def test_a_log_over_the_limit_is_rolled_when_a_process_joins_and_the_server_writes_on(
    server_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.environ.get("RAG_TEST_DATABASE") == "testcontainers":
        pytest.skip("RAG_TEST_DATABASE=testcontainers: the server's log is in its container")
    monkeypatch.setattr(server_log, "LOG_ROLL_BYTES", LIMIT)
    log = TEST_DATA_DIR / "pg" / "log"
    with log.open("ab") as grown:  # weeks of starts, checkpoints and statement errors
        grown.write(b"2026-01-01 00:00:00.000 UTC [1] LOG:  an old line of a long-running server\n" * 4000)
    assert log.stat().st_size > 4 * LIMIT

    start_embedded_server(TEST_DATA_DIR)  # joins the running server, as every `rag` command does

    assert log.stat().st_size < LIMIT // 4, "the log was not rolled over"
    previous = (TEST_DATA_DIR / "pg" / "log.1").read_bytes()
    assert 0 < len(previous) <= LIMIT and previous.endswith(b"an old line of a long-running server\n")
    assert previous.startswith(b"2026-01-01"), "log.1 starts within a line"
    with engine.connect() as conn:  # the running server's next line lands at the start of the cut file
        conn.exec_driver_sql("DO $$BEGIN RAISE LOG 'rag-server-log-marker'; END$$")
    deadline = time.monotonic() + 10
    while b"rag-server-log-marker" not in log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the server's write
    written = log.read_bytes()
    assert b"rag-server-log-marker" in written
    assert not written.startswith(b"\0"), "the server wrote past a hole at its old offset"


def test_a_process_that_stays_rolls_the_log_while_it_runs(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rag serve` running for weeks with no other process joining: its own thread keeps the log bounded."""
    if os.environ.get("RAG_TEST_DATABASE") != "testcontainers":  # the session's join started the test server's
        assert server_log._checkers[(TEST_DATA_DIR / "pg").resolve()].is_alive()
    monkeypatch.setattr(server_log, "LOG_ROLL_BYTES", LIMIT)
    monkeypatch.setattr(server_log, "LOG_CHECK_S", 0.05)
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    log = pgdata / "log"
    log.write_bytes(b"a line of a server that runs for weeks\n" * 8000)

    server_log.keep_rolling(pgdata)

    deadline = time.monotonic() + 10
    while log.stat().st_size > LIMIT and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the checking thread
    assert log.stat().st_size == 0
    assert 0 < (pgdata / "log.1").stat().st_size <= LIMIT
    log.write_bytes(b"grown again\n" * 8000)  # and again, with no process joining
    deadline = time.monotonic() + 10
    while log.stat().st_size > LIMIT and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.stat().st_size == 0
    thread = server_log._checkers[pgdata]
    shutil.rmtree(pgdata)  # a data folder removed: its thread ends
    thread.join(timeout=10)
    assert not thread.is_alive()
