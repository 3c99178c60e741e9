"""Switching the embedding model with ``rag reindex --all`` (issue 24 point 3), on the real database.

Two fake models of the same dimension stand behind the ``Embedder`` protocol: hashing vectors as they
are (model A) and rolled by one place (model B), so each model's vectors are told apart in the rows.
Batches are two chunks, so a run over a few one-chunk documents writes several batches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import inspect, text

from rag_service.db import bulk as bulk_module
from rag_service.db import migrate
from rag_service.db.engine import make_engine
from rag_service.db.index_settings import read_index_settings
from rag_service.db.model_switch import begin_model_switch
from rag_service.db.status import read_status
from rag_service.embed import HashingEmbedder, bundled_model_id
from rag_service.errors import EmbeddingMismatchError
from rag_service.ingest import batch
from rag_service.ingest import indexer as indexer_module
from rag_service.ingest.indexer import Indexer
from rag_service.ingest.report import IngestReport
from rag_service.server import ServerConfig
from rag_service.service import UniversalRAGService
from rag_service.shutdown import Interrupted
from tests.conftest import seed_onnx_export
from tests.server.conftest import start_server

A, B = "test/model-a", "test/model-b"
DOCS = {
    "alpha": [
        ("backups.txt", "Backups", "Nightly backups run with pg_dump and are kept for thirty days."),
        ("restore.txt", "Restore", "Restoring loads the dump into a fresh database with pg_restore."),
        ("replica.txt", "Replica", "A streaming replica follows the primary with little lag."),
    ],
    "beta": [
        ("vacuum.txt", "Vacuum", "Vacuum reclaims the space of dead rows and freezes old ones."),
        ("wal.txt", "WAL", "Replication slots keep write-ahead log until every standby has read it."),
    ],
}
UNFINISHED = f"a switch of the embedding model from {A!r} to {B!r} is unfinished"


class RolledEmbedder(HashingEmbedder):
    """Another model of the same dimension: the hashing vectors rolled by one place."""

    def embed_documents(self, texts: Sequence[str]) -> Any:
        return np.roll(super().embed_documents(texts), 1, axis=1)

    def embed_query(self, text: str) -> Any:
        return np.roll(super().embed_query(text), 1)


class StopsAfter:
    """An embedder that embeds ``calls`` batches, then raises ``error`` (a failed model, or a stop signal)."""

    def __init__(self, inner: HashingEmbedder, *, calls: int, error: BaseException) -> None:
        self.inner, self.calls, self.error = inner, calls, error
        self.model_id, self.dim = inner.model_id, inner.dim

    def embed_documents(self, texts: Sequence[str]) -> Any:
        if self.calls == 0:
            raise self.error
        self.calls -= 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def model_a() -> HashingEmbedder:
    return HashingEmbedder(model_id=A)


def model_b() -> HashingEmbedder:
    return RolledEmbedder(model_id=B)


@pytest.fixture
def indexed(fresh_database, settings, monkeypatch):
    """A database whose collections hold vectors of model A, written in batches of two chunks."""
    monkeypatch.setattr(batch, "EMBED_BATCH_CHUNKS", 2)
    settings = replace(settings, embed_headers=False, rerank_model="none")
    indexer = Indexer(fresh_database, model_a(), settings)
    for collection, docs in DOCS.items():
        assert indexer.index_texts(docs, collection=collection).added == len(docs)
    return fresh_database, settings


def _settings_row(db) -> tuple[str, str | None]:
    with db.transaction() as session:
        stored = read_index_settings(session)
        assert stored is not None
        return stored.embedding_model, stored.switching_to


def _vectors_are(db, embedder) -> bool:
    """Whether every stored chunk's vector is ``embedder``'s vector of its text."""
    with db.transaction() as session:
        rows = session.execute(text("SELECT content, embedding::text FROM document_chunks")).all()
    assert rows
    stored = [(content, np.asarray(json.loads(vector))) for content, vector in rows]
    return all(np.allclose(vector, embedder.embed_documents([content])[0], atol=1e-6) for content, vector in stored)


def _service(db, settings, embedder, **kwargs: Any) -> UniversalRAGService:
    return UniversalRAGService(settings, database=db, embedder=embedder, reranker=None, **kwargs)


@pytest.mark.parametrize("bulk", [False, True], ids=["row-path", "bulk"])
def test_reindex_all_switches_every_collection_to_a_model_of_the_same_dimension(indexed, bulk, monkeypatch) -> None:
    db, settings = indexed
    cleared: list[str] = []
    if bulk:  # each collection rewritten as one bulk load (``db.bulk_replace``), beside the other one
        clear = bulk_module.clear_replaced
        monkeypatch.setattr(indexer_module, "BULK_MIN_DOCUMENTS", 0)
        monkeypatch.setattr(bulk_module, "clear_replaced", lambda *a, **k: cleared.append(clear(*a, **k)) or "")
    report = _service(db, settings, model_b(), check_model=False).reindex_all(switch_model=True)
    assert cleared == (["deleted", "deleted"] if bulk else [])
    assert report.ok and report.updated == 5 and report.chunks_embedded == 5
    assert report.model_switch == f"embedding model: switched from {A!r} to {B!r}; every collection re-embedded"
    assert report.model_switch in report.lines()
    assert _settings_row(db) == (B, None)
    assert _vectors_are(db, model_b()) and not _vectors_are(db, model_a())

    result = _service(db, settings, model_b()).retrieve("pg_restore fresh database", "search", collection="alpha")
    assert result.chunks[0].source == "restore.txt"
    with pytest.raises(EmbeddingMismatchError) as refused:
        _service(db, settings, model_a())
    assert str(refused.value) == (
        f"this database holds vectors of {B!r} but RAG_EMBEDDING_MODEL and RAG_EMBEDDING_BACKEND give {A!r}; "
        "run `rag reindex --all` to re-embed every collection with it, or set them back"
    )


def test_a_model_of_the_stored_one_reindexes_without_a_switch(indexed) -> None:
    db, settings = indexed
    report = _service(db, settings, model_a()).reindex_all(switch_model=True)
    assert report.ok and report.updated == 5 and report.model_switch == ""
    assert _settings_row(db) == (A, None)


def test_mismatches_are_one_line_naming_both_models_and_the_fix(indexed) -> None:
    db, settings = indexed
    refusals = [
        lambda: _service(db, settings, model_b()),
        lambda: Indexer(db, model_b(), settings).index_texts([("n.txt", "N", "notes")], collection="alpha"),
        lambda: _service(db, settings, model_b(), check_model=False).retrieve("backups", "search", collection="alpha"),
        lambda: _service(db, settings, model_b(), check_model=False).reindex_all(),  # the HTTP API's: no switch
    ]
    for refusal in refusals:
        with pytest.raises(EmbeddingMismatchError) as refused:
            refusal()
        message = str(refused.value)
        assert "\n" not in message and f"holds vectors of {A!r}" in message and f"give {B!r}" in message
        assert "run `rag reindex --all`" in message
    other_dim = HashingEmbedder(dim=768, model_id="test/wide")
    with pytest.raises(EmbeddingMismatchError) as wider:  # an ordinary write; `rag reindex --all` switches
        Indexer(db, other_dim, settings).index_texts([("n.txt", "N", "notes")], collection="alpha")
    assert str(wider.value) == (
        "embedding model 'test/wide' makes 768-d vectors but this database stores 384-d vectors; "
        "run `rag reindex --all` to re-embed every collection with it, or use a 384-d model"
    )
    with pytest.raises(EmbeddingMismatchError) as one:
        _service(db, settings, model_b(), check_model=False).reindex_all(collection="alpha", switch_model=True)
    assert str(one.value) == (
        f"switching the embedding model from {A!r} to {B!r} re-embeds every collection; "
        "run `rag reindex --all` without --collection"
    )
    assert _settings_row(db) == (A, None), "a refused switch records nothing"


def test_a_running_service_refuses_queries_once_another_process_switches_the_model(indexed) -> None:
    db, settings = indexed
    running = _service(db, settings, model_a())
    assert running.retrieve("backups", "search", collection="alpha").chunks
    assert Indexer(db, model_b(), settings).reindex_all(switch_model=True).ok
    with pytest.raises(EmbeddingMismatchError, match=f"holds vectors of {B!r} but .* give {A!r}"):
        running.retrieve("backups", "search", collection="alpha")


def test_a_running_http_server_answers_503_with_the_one_line_once_the_model_is_switched(indexed) -> None:
    db, settings = indexed
    live = start_server(_service(db, settings, model_a()), ServerConfig(token=None, read_token=None))
    try:
        with live.client() as client:
            query = {"query": "backups", "context": "search", "collection": "alpha"}
            assert client.post("/api/rag/retrieve", json=query).status_code == 200
            assert Indexer(db, model_b(), settings).reindex_all(switch_model=True).ok
            refused = client.post("/api/rag/retrieve", json=query)
    finally:
        live.stop()
    assert refused.status_code == 503
    assert refused.json()["error"] == {
        "code": "database_not_ready",
        "message": f"this database holds vectors of {B!r} but RAG_EMBEDDING_MODEL and RAG_EMBEDDING_BACKEND give "
        f"{A!r}; run `rag reindex --all` to re-embed every collection with it, or set them back",
    }


def test_a_failed_switch_leaves_the_marker_refuses_and_a_second_run_finishes_it(indexed) -> None:
    db, settings = indexed
    failing = StopsAfter(model_b(), calls=1, error=RuntimeError("the model crashed"))
    report = Indexer(db, failing, settings).reindex_all(switch_model=True)
    assert report.updated >= 1 and report.failed, "precondition: some documents were re-embedded, some failed"
    assert "is unfinished" in report.model_switch
    assert _settings_row(db) == (A, B)

    for embedder in (model_a(), model_b()):  # the database holds vectors of both: every model is refused
        with pytest.raises(EmbeddingMismatchError) as refused:
            _service(db, settings, embedder)
        assert str(refused.value).startswith(UNFINISHED) and "run `rag reindex --all`" in str(refused.value)
        with pytest.raises(EmbeddingMismatchError, match=UNFINISHED):
            Indexer(db, embedder, settings).index_texts([("n.txt", "N", "notes")], collection="alpha")
        with pytest.raises(EmbeddingMismatchError, match="re-embeds every collection; run `rag reindex --all` without"):
            Indexer(db, embedder, settings).reindex_all(collection="alpha", switch_model=True)
    status = read_status(db.engine).lines()
    assert (
        f"switch:     from {A} to {B} unfinished (reads and writes refuse); run `rag reindex --all` with {B} "
        "to finish it" in status
    )

    finished = _service(db, settings, model_b(), check_model=False).reindex_all(switch_model=True)
    assert finished.ok and finished.updated == 5
    assert "switched from" in finished.model_switch
    assert _settings_row(db) == (B, None) and _vectors_are(db, model_b())
    assert _service(db, settings, model_b()).retrieve("replica lag", "search", collection="alpha").chunks
    assert not [line for line in read_status(db.engine).lines() if line.startswith("switch:")]


def test_a_stopped_switch_reports_what_it_wrote_and_is_finished_by_the_next_run(indexed) -> None:
    db, settings = indexed
    stopping = StopsAfter(model_b(), calls=1, error=KeyboardInterrupt())  # what SIGINT raises (shutdown.py)
    with pytest.raises(Interrupted) as stopped:
        Indexer(db, stopping, settings).reindex_all(switch_model=True)
    partial = stopped.value.partial
    assert isinstance(partial, IngestReport) and partial.updated >= 1
    assert "is unfinished" in partial.model_switch
    assert _settings_row(db) == (A, B)
    with pytest.raises(EmbeddingMismatchError, match=UNFINISHED):
        _service(db, settings, model_b())

    assert Indexer(db, model_b(), settings).reindex_all(switch_model=True).ok
    assert _settings_row(db) == (B, None) and _vectors_are(db, model_b())


def test_an_unfinished_switch_can_be_switched_back(indexed) -> None:
    db, settings = indexed
    failing = StopsAfter(model_b(), calls=1, error=RuntimeError("the model crashed"))
    assert not Indexer(db, failing, settings).reindex_all(switch_model=True).ok
    assert _settings_row(db) == (A, B)
    back = Indexer(db, model_a(), settings).reindex_all(switch_model=True)
    assert (
        back.ok and back.model_switch == f"embedding model: switched from {B!r} to {A!r}; every collection re-embedded"
    )
    assert _settings_row(db) == (A, None) and _vectors_are(db, model_a())


def test_an_ingest_that_began_before_a_switch_writes_no_vector_after_it(indexed) -> None:
    db, settings = indexed

    class SwitchesMeanwhile(HashingEmbedder):
        """Model A, while another process begins a switch to B as this batch is being embedded."""

        def embed_documents(self, texts: Sequence[str]) -> Any:
            with db.transaction() as session:
                begin_model_switch(session, model_id=B, dim=384, fts_config=settings.fts_config, every_collection=True)
            return super().embed_documents(texts)

    report = Indexer(db, SwitchesMeanwhile(model_id=A), settings).index_texts(
        [("late.txt", "Late", "A document indexed while the model is being switched.")], collection="gamma"
    )
    assert report.added == 0 and [p.reason for p in report.failed] == [
        f"{UNFINISHED}, so this database holds vectors of both; run `rag reindex --all` with RAG_EMBEDDING_MODEL "
        f"and RAG_EMBEDDING_BACKEND giving {B!r} to finish it (or {A!r} to switch back)"
    ]
    with db.transaction() as session:
        assert session.execute(text("SELECT count(*) FROM documents WHERE collection = 'gamma'")).scalar() == 0


def test_migration_0008_adds_the_marker_and_refuses_a_downgrade_that_would_hide_a_switch(
    database_factory, settings
) -> None:
    engine = make_engine(database_factory.create("rag_switch_mig"), settings)
    try:
        migrate.upgrade(engine, "0007")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO index_settings (id, embedding_model, embedding_dim, fts_config) "
                    "VALUES (1, 'test/model-a', 384, 'english')"
                )
            )
        assert read_status(engine).switching_to is None  # the status reads a 0007 database too
        migrate.upgrade(engine)
        columns = {c["name"]: c for c in inspect(engine).get_columns("index_settings")}
        assert columns["switching_to"]["nullable"]
        with engine.begin() as conn:
            assert conn.execute(text("SELECT switching_to FROM index_settings")).scalar() is None
            conn.execute(text("UPDATE index_settings SET switching_to = 'test/model-b'"))
        assert read_status(engine).switching_to == B
        with pytest.raises(RuntimeError, match="is unfinished; finish it with `rag reindex --all` before downgrading"):
            migrate.downgrade(engine, "0007")
        with engine.begin() as conn:
            conn.execute(text("UPDATE index_settings SET switching_to = NULL"))
        migrate.downgrade(engine, "0007")
        assert "switching_to" not in {c["name"] for c in inspect(engine).get_columns("index_settings")}
        with engine.connect() as conn:
            assert migrate.current_revision(conn) == "0007"
            assert conn.execute(text("SELECT embedding_model FROM index_settings")).scalar() == A
    finally:
        engine.dispose()


def _rag(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rag_service.cli", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_rag_reindex_all_switches_from_the_hashing_model_to_the_bundled_minilm(
    database_factory, tmp_path, onnx_export
) -> None:
    data_dir = tmp_path / "data"
    seed_onnx_export(data_dir, onnx_export)
    hashing = dict(os.environ)
    hashing.update(
        RAG_DATABASE_URL=database_factory.create("rag_switch_cli"),
        RAG_EMBEDDING_MODEL="hashing",
        RAG_RERANK_MODEL="none",
        RAG_DATA_DIR=str(data_dir),
    )
    minilm = hashing | {"RAG_EMBEDDING_MODEL": "all-MiniLM-L6-v2"}
    (tmp_path / ".git").mkdir()
    (tmp_path / "n.md").write_text("# Backups\n\nNightly backups are restored with pg_restore into a fresh database.\n")
    assert _rag(hashing, "db", "upgrade").returncode == 0
    assert _rag(hashing, "reindex", "n.md", "--collection", "kb", "--quiet", cwd=tmp_path).returncode == 0

    mismatch = (
        f"error: this database holds vectors of 'test/hashing-embedder' but RAG_EMBEDDING_MODEL and "
        f"RAG_EMBEDDING_BACKEND give {bundled_model_id()!r}; run `rag reindex --all` to re-embed every collection "
        "with it, or set them back"
    )
    for args in (("query", "backups", "--collection", "kb"), ("reindex", "n.md", "--collection", "kb")):
        refused = _rag(minilm, *args, cwd=tmp_path)
        assert (refused.returncode, refused.stderr.strip()) == (1, mismatch), refused.stderr
    one = _rag(minilm, "reindex", "--all", "--collection", "kb")
    assert one.returncode == 1 and one.stderr.strip() == (
        f"error: switching the embedding model from 'test/hashing-embedder' to {bundled_model_id()!r} re-embeds "
        "every collection; run `rag reindex --all` without --collection"
    )

    switched = _rag(minilm, "reindex", "--all", "--quiet")
    assert switched.returncode == 0, switched.stderr
    assert f"embedding model: switched from 'test/hashing-embedder' to {bundled_model_id()!r}" in switched.stdout
    answer = _rag(minilm, "query", "how are backups restored?", "--collection", "kb", "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["chunks"][0]["source"] == "n.md"
    status = _rag(minilm, "db", "status")
    assert f"embeddings: {bundled_model_id()} (384-d)" in status.stdout and "switch:" not in status.stdout
    back = _rag(hashing, "query", "backups", "--collection", "kb")
    assert back.returncode == 1 and f"holds vectors of {bundled_model_id()!r}" in back.stderr
