"""Switching a populated database to a model of another dimension with ``rag reindex --all`` (``db.vector_columns``).

Before, a database holding 384-d vectors refused a 768-d model with "use a new database". Now the switch opens the
vector columns (any size, the HNSW index dropped and its definition kept), re-embeds every collection and closes
them with the new dimension and the index rebuilt; a run that fails leaves the old vectors of the failed documents
beside the new ones, refuses reads, and is finished (or switched back) by the next run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.index_settings import read_index_settings
from rag_service.db.status import read_status
from rag_service.embed import HashingEmbedder
from rag_service.errors import EmbeddingMismatchError
from rag_service.ingest import batch
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.integration.test_bulk_index import _fresh, write_corpus
from tests.integration.test_model_switch import DOCS, StopsAfter
from tests.integration.test_vector_columns import _COLUMN_TYPES

NARROW, WIDE = "test/narrow", "test/wide"
#: every HNSW index of the chunks, a partitioned table's partitions' included: (table, definition without its name)
_HNSW_INDEXES = text(
    "SELECT tablename, regexp_replace(indexdef, '^CREATE INDEX \\S+ ON ', '') FROM pg_indexes "
    "WHERE tablename LIKE 'document_chunks%' AND indexdef LIKE '%USING hnsw%' ORDER BY 1, 2"
)
_EDGES = text(
    "SELECT s.content, t.content, e.kind, round(e.weight::numeric, 6) FROM chunk_edges e "
    "JOIN document_chunks s ON s.id = e.source_chunk_id JOIN document_chunks t ON t.id = e.target_chunk_id "
    "ORDER BY 1, 2, 3, 4"  # chunks of equal text (a page's paragraph, the FAQ's) have edges told apart by weight only
)
_CHUNK_DIMENSIONS = text("SELECT vector_dims(embedding), count(*) FROM document_chunks GROUP BY 1 ORDER BY 1")
_CONTEXT_DIMENSIONS = text(
    "SELECT DISTINCT vector_dims(embedding) FROM document_contexts WHERE embedding IS NOT NULL ORDER BY 1"
)


def narrow() -> HashingEmbedder:
    return HashingEmbedder(dim=384, model_id=NARROW)


def wide() -> HashingEmbedder:
    return HashingEmbedder(dim=768, model_id=WIDE)


def _rows(engine: Engine, query: Any) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query).all()]


def _service(engine: Engine, settings: Any, embedder: HashingEmbedder) -> UniversalRAGService:
    return UniversalRAGService(settings, database=Database(engine), embedder=embedder, reranker=None)


def _unfinished(from_model: str, to_model: str) -> str:
    return f"a switch of the embedding model from {from_model!r} to {to_model!r} is unfinished"


def _settings_row(engine: Engine) -> tuple[str, int, str | None, list[str] | None]:
    with Database(engine).transaction() as session:
        stored = read_index_settings(session)
        assert stored is not None
        return stored.embedding_model, stored.embedding_dim, stored.switching_to, stored.vector_indexes


def _assert_closed(engine: Engine, dim: int, *, hnsw: list[tuple[Any, ...]], chunks: int) -> None:
    """The columns have ``dim`` dimensions, every vector is of that size and the HNSW indexes are as before."""
    column = f"vector({dim})"
    assert _rows(engine, _COLUMN_TYPES) == [("document_chunks", column), ("document_contexts", column)]
    assert _rows(engine, _HNSW_INDEXES) == hnsw
    assert _rows(engine, _CHUNK_DIMENSIONS) == [(dim, chunks)]
    assert _rows(engine, _CONTEXT_DIMENSIONS) == [(dim,)]


@pytest.mark.parametrize(("bulk", "partitioned"), [(False, False), (True, False), (True, True)])
def test_reindex_all_switches_a_populated_database_to_a_model_of_another_dimension(
    database_factory: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bulk: bool, partitioned: bool
) -> None:
    docs = write_corpus(tmp_path, monkeypatch)
    engine = _fresh(database_factory, settings, partitioned=partitioned)
    try:
        first = Indexer(Database(engine), narrow(), settings)
        assert first.index_paths([docs], collection="kb").added == 8
        assert first.index_texts(DOCS["beta"], collection="notes").added == 2
        hnsw = _rows(engine, _HNSW_INDEXES)
        assert hnsw and all("vector_cosine_ops" in definition for _, definition in hnsw)
        chunks = sum(count for _, count in _rows(engine, _CHUNK_DIMENSIONS))

        switching = Indexer(Database(engine), wide(), settings)
        switching.bulk_min_documents = 0 if bulk else 10**9
        report = switching.reindex_all(switch_model=True)
        assert report.failed == [] and report.ok and report.updated == 10
        assert report.model_switch == (
            f"embedding model: switched from {NARROW!r} to {WIDE!r}; every collection re-embedded"
        )
        _assert_closed(engine, 768, hnsw=hnsw, chunks=chunks)
        assert _settings_row(engine) == (WIDE, 768, None, None)
        # the similarity edges, left out while the columns were open, are the new vectors' (a rebuild finds the same)
        edges = _rows(engine, _EDGES)
        assert any(kind == "similar" for _, _, kind, _ in edges)
        switching.build_graph()
        assert _rows(engine, _EDGES) == edges

        service = _service(engine, settings, wide())
        result = service.retrieve("restore a backup of the database", "search", collection="kb")
        assert result.chunks and "backup" in result.chunks[0].source
        with pytest.raises(EmbeddingMismatchError) as refused:
            _service(engine, settings, narrow())
        assert str(refused.value) == (
            f"embedding model {NARROW!r} makes 384-d vectors but this database stores 768-d vectors; "
            "run `rag reindex --all` to re-embed every collection with it, or use a 768-d model"
        )
    finally:
        engine.dispose()


@pytest.fixture
def narrow_database(fresh_database: Database, settings: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Engine, Any]:
    """Two collections of 384-d vectors, written (and re-embedded) in batches of two chunks."""
    monkeypatch.setattr(batch, "EMBED_BATCH_CHUNKS", 2)
    settings = replace(settings, embed_headers=False, rerank_model="none")
    indexer = Indexer(fresh_database, narrow(), settings)
    for collection, docs in DOCS.items():
        assert indexer.index_texts(docs, collection=collection).added == len(docs)
    return fresh_database.engine, settings


def _fail_halfway(engine: Engine, settings: Any) -> None:
    """A switch to the wide model whose model fails after one batch: some documents re-embedded, some failed."""
    failing = StopsAfter(wide(), calls=1, error=RuntimeError("the model crashed"))
    report = Indexer(Database(engine), failing, settings).reindex_all(switch_model=True)
    assert report.updated >= 1 and report.failed and "is unfinished" in report.model_switch


def test_a_failed_switch_keeps_the_old_vectors_refuses_every_model_and_is_finished_by_the_next_run(
    narrow_database: tuple[Engine, Any],
) -> None:
    engine, settings = narrow_database
    hnsw = _rows(engine, _HNSW_INDEXES)
    _fail_halfway(engine, settings)

    assert _rows(engine, _COLUMN_TYPES) == [("document_chunks", "vector"), ("document_contexts", "vector")]
    assert _rows(engine, _HNSW_INDEXES) == []
    sizes = dict(_rows(engine, _CHUNK_DIMENSIONS))
    assert set(sizes) == {384, 768} and sum(sizes.values()) == 5, "the failed documents keep their old vectors"
    model, dim, switching_to, kept = _settings_row(engine)
    assert (model, dim, switching_to) == (NARROW, 384, WIDE)
    assert kept is not None and [definition.split(" USING ")[1] for definition in kept] == [
        definition.split(" USING ")[1] for _, definition in hnsw
    ]
    for embedder in (narrow(), wide()):  # vectors of both sizes: every model is refused, by the switch's line
        with pytest.raises(EmbeddingMismatchError, match=_unfinished(NARROW, WIDE)):
            _service(engine, settings, embedder)
        with pytest.raises(EmbeddingMismatchError, match=_unfinished(NARROW, WIDE)):
            Indexer(Database(engine), embedder, settings).index_texts([("n.txt", "N", "notes")], collection="alpha")
    assert (
        f"switch:     from {NARROW} to {WIDE} unfinished (reads and writes refuse); run `rag reindex --all` with "
        f"{WIDE} to finish it (another dimension: the HNSW index is rebuilt when it ends)"
    ) in read_status(engine).lines()
    with pytest.raises(RuntimeError, match="to another dimension is unfinished; finish it with `rag reindex --all`"):
        migrate.downgrade(engine, "0017")

    finished = Indexer(Database(engine), wide(), settings).reindex_all(switch_model=True)
    assert finished.ok and finished.updated == 5 and "switched from" in finished.model_switch
    _assert_closed(engine, 768, hnsw=hnsw, chunks=5)
    assert _settings_row(engine) == (WIDE, 768, None, None)
    assert _service(engine, settings, wide()).retrieve("replica lag", "search", collection="alpha").chunks


def test_an_unfinished_switch_to_another_dimension_can_be_switched_back(narrow_database: tuple[Engine, Any]) -> None:
    engine, settings = narrow_database
    hnsw = _rows(engine, _HNSW_INDEXES)
    _fail_halfway(engine, settings)
    back = Indexer(Database(engine), narrow(), settings).reindex_all(switch_model=True)
    assert back.ok and back.model_switch == (
        f"embedding model: switched from {WIDE!r} to {NARROW!r}; every collection re-embedded"
    )
    _assert_closed(engine, 384, hnsw=hnsw, chunks=5)
    assert _settings_row(engine) == (NARROW, 384, None, None)


def test_a_switch_to_a_model_over_hnsws_limit_is_one_line_and_changes_nothing(
    narrow_database: tuple[Engine, Any],
) -> None:
    engine, settings = narrow_database
    hnsw = _rows(engine, _HNSW_INDEXES)
    huge = HashingEmbedder(dim=2001, model_id="test/huge")
    with pytest.raises(EmbeddingMismatchError) as refused:
        Indexer(Database(engine), huge, settings).reindex_all(switch_model=True)
    assert str(refused.value) == (
        "embedding model 'test/huge' makes 2001-d vectors; pgvector's HNSW index takes at most 2,000; "
        "choose a model of at most 2,000 dimensions"
    )
    _assert_closed(engine, 384, hnsw=hnsw, chunks=5)
    assert _settings_row(engine) == (NARROW, 384, None, None)
