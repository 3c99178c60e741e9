"""A full disk is one clear line naming the fix, and a document it stops keeps its previous version.

The server's own ``disk_full`` error (SQLSTATE 53100) is raised by a trigger, as PostgreSQL raises it when a
data file cannot grow; where this machine lets root mount a tmpfs, the embedded server is also started on a
disk too small for it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Connection, text

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.embedded import (
    joined_embedded_servers,
    leave_embedded_servers,
    start_embedded_server,
    stop_embedded_server,
)
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.errors import DatabaseUnavailableError, DiskFullError
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.server.conftest import WRITE_TOKEN, start_server

#: the server's message when a data file cannot grow (PostgreSQL's own wording)
_NO_SPACE = 'could not extend file "base/16384/16400": No space left on device'


def _fail_writes_of(connection: Connection, table: str, condition: str) -> None:
    """A trigger raising the server's disk-full error on each row of ``table`` meeting ``condition``."""
    connection.execute(text(f"""
        CREATE FUNCTION pg_temp.disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF {condition} THEN
                RAISE EXCEPTION '{_NO_SPACE}' USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
            END IF;
            RETURN NEW;
        END $$"""))
    connection.execute(text(
        f"CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION pg_temp.disk_full()"
    ))


def test_a_document_the_disk_has_no_room_for_keeps_its_previous_version_and_the_report_names_the_fix(
    db: Database, connection: Connection, settings: Settings, tmp_path: Path
) -> None:
    indexer = Indexer(db, HashingEmbedder(), settings)
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.md").write_text(f"# {name}\n\nThe first version of document {name}, about backups.\n")
    assert indexer.index_paths([str(folder)], collection="disk").ok
    for name in ("a", "b", "c"):
        (folder / f"{name}.md").write_text(f"# {name}\n\nThe second version of document {name}, about restores.\n")
    _fail_writes_of(connection, "document_chunks", "NEW.content LIKE '%second version of document b%'")

    report = indexer.index_paths([str(folder)], collection="disk")

    assert [Path(p.source).name for p in report.failed] == ["b.md"] and report.updated == 2, report
    reason = report.failed[0].reason
    assert "no disk space left" in reason and "No space left on device" in reason, reason
    assert "free space on the disk of the server's data directory" in reason and "\n" not in reason, reason
    stored = dict(connection.execute(text(
        "SELECT d.title, string_agg(c.content, ' ') FROM documents d JOIN document_chunks c ON c.document_id = d.id "
        "WHERE d.collection = 'disk' GROUP BY d.title"
    )).all())
    assert "first version of document b" in stored["b"], "the failed document keeps its previous version"
    assert all("second version" in stored[name] for name in ("a", "c")), stored


def test_a_write_the_disk_has_no_room_for_is_one_line_and_a_507_over_http(
    db: Database, connection: Connection, settings: Settings
) -> None:
    _fail_writes_of(connection, "rag_configurations", "true")
    with pytest.raises(DiskFullError) as raised, db.transaction() as session:
        session.execute(text("UPDATE rag_configurations SET max_chunks = max_chunks WHERE context_type = 'agent'"))
    message = str(raised.value)
    assert "no disk space left" in message and "then retry" in message and "\n" not in message, message

    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    from rag_service.server import ServerConfig

    live = start_server(service, ServerConfig(token=WRITE_TOKEN))
    try:
        with live.client(WRITE_TOKEN) as client:
            response = client.put("/api/presets/agent", json={"max_chunks": 3})
            spec = client.get("/openapi.json").json()
    finally:
        live.stop()
    assert response.status_code == 507, response.text
    error = response.json()["error"]
    assert error["code"] == "disk_full" and "no disk space left" in error["message"], error
    assert "507" in spec["paths"]["/api/presets/{context}"]["put"]["responses"]


@contextmanager
def _mounted_tmpfs(folder: Path, megabytes: int) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` at ``folder``, unmounted after; skips where this process may not mount one."""
    folder.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)]
    done = subprocess.run(mount, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}): a full disk is not reproducible")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MB tmpfs: too small for a cluster."""
    with _mounted_tmpfs(tmp_path / "small", 24) as disk:
        yield disk


def test_an_embedded_server_on_a_full_disk_says_how_little_is_free(small_disk: Path) -> None:
    with pytest.raises(DatabaseUnavailableError) as raised:
        start_embedded_server(small_disk / "data")
    message = str(raised.value)
    assert "did not start" in message and f"MB are free on the disk of {small_disk}" in message, message


@pytest.fixture
def server_on_a_small_disk(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An embedded server of the test's own on a 100 MB tmpfs: room for the schema, not for a corpus."""
    with _mounted_tmpfs(tmp_path / "small", 100) as disk:
        url = start_embedded_server(disk / "data", shared_buffers="128MB")
        yield url, disk
        leave_embedded_servers(keep=frozenset(p for p in joined_embedded_servers() if disk not in p.parents))
        stop_embedded_server(disk / "data")


@pytest.mark.multiprocess
def test_an_ingest_that_fills_the_disk_reports_every_document_and_names_the_disk(
    server_on_a_small_disk: tuple[str, Path], settings: Settings, tmp_path: Path
) -> None:
    """PostgreSQL cannot write its WAL on a full disk and stops (PANIC); the run still ends with its report."""
    url, disk = server_on_a_small_disk
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    folder = tmp_path / "docs"
    folder.mkdir()
    words = [f"term{i}" for i in range(20_000)]
    for doc in range(300):  # ~50 MB of chunks, postings and vectors: more than the disk has left
        paragraphs = (" ".join(words[(doc * 7919 + p * 131 + w * 17) % len(words)] for w in range(120))
                      for p in range(30))
        (folder / f"doc{doc:03d}.md").write_text(f"# Document {doc}\n\n" + "\n\n".join(paragraphs))
    try:
        report = Indexer(Database(engine), HashingEmbedder(), settings).index_paths([str(folder)], collection="fill")
    finally:
        engine.dispose()

    assert report.added + len(report.failed) == 300 and len(report.failed) > 0, report.lines()[0]
    for problem in report.failed:  # the disk is named: by the server's error, or beside the lost connection
        reason = problem.reason
        assert reason.startswith("could not be written"), reason
        assert "no disk space left" in reason or f"MB are free on the disk of {disk}" in reason, reason
