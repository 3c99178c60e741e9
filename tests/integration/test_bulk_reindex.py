"""``rag reindex --all`` as one bulk load (``db.bulk_replace``) ends as a first index of the same texts.

A collection indexed row by row is reindexed in bulk with other chunking settings; the reference is
a fresh database where the same corpus is indexed row by row with those settings, its chunk ids
started where the reindexed database's were. Every table of the two is compared row for row (as
``test_bulk_index`` compares a bulk first index), alone (the chunk tables truncated and the indexes
rebuilt), partitioned and beside another collection (the old rows deleted, the indexes kept). A
document the reindex cannot rewrite keeps its previous version with the statistics still exact, and
a failing reindex leaves the database as it was. Until the commit, readers see the old collection whole
(beside another collection) or wait for it (alone: the tables are truncated), never a mix.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from rag_service.db import bulk as bulk_module
from rag_service.errors import DocumentReadError
from rag_service.ingest.batch import Batch
from rag_service.ingest.bulkwrite import BulkWriter
from rag_service.ingest.progress import Progress
from tests.integration.test_bulk_index import (
    _LOAD_SCHEMAS,
    TOPICS,
    _fresh,
    _indexer,
    assert_as_it_was,
    dump,
    fail_after_finish,
    write_corpus,
)

_CHUNK_SEQUENCE = "pg_get_serial_sequence('document_chunks', 'id')"


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return write_corpus(tmp_path, monkeypatch)


def _rechunked(settings: Any) -> Any:
    """Settings whose chunks differ from the defaults' (smaller, no overlap), packed postings on."""
    return dataclasses.replace(settings, chunk_size=300, chunk_overlap=0, bm25_packed_min_chunks=1)


def _chunk_position(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f"SELECT pg_sequence_last_value({_CHUNK_SEQUENCE}::regclass)")).scalar_one())


def _kb_chunk_ids(state: dict[str, list[Any]]) -> list[str]:
    """The ids of collection kb's chunks in a ``dump`` (a chunk row: id, document id, collection, ...)."""
    return [row[0] for row in state["document_chunks"] if "kb" in row[1:4]]


# the statistics as the row triggers keep them, recounted from what they count
_STATISTICS_HOLD = (
    "SELECT (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (SELECT collection || lexeme || doc_freq AS x "
    "FROM lexeme_stats) s) = (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (SELECT collection || lexeme "
    "|| count(*) AS x FROM chunk_terms GROUP BY collection, lexeme) t)",
    "SELECT (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (SELECT collection || chunk_count || '/' || "
    "total_length AS x FROM collection_stats) s) = (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (SELECT "
    "collection || count(*) || '/' || sum(lexeme_count) AS x FROM document_chunks GROUP BY collection) t)",
    "SELECT (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (SELECT collection || context_count || '/' || "
    "context_length AS x FROM context_stats) s) = (SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (SELECT "
    "collection || count(*) || '/' || sum(length) AS x FROM document_contexts GROUP BY collection) t)",
    "SELECT count(*) = (SELECT count(*) FROM document_chunks c, unnest(c.content_tsv)) FROM chunk_terms",
    "SELECT NOT EXISTS (SELECT 1 FROM chunk_edges e WHERE NOT EXISTS (SELECT 1 FROM document_chunks c "
    "WHERE c.id = e.source_chunk_id) OR NOT EXISTS (SELECT 1 FROM document_chunks c WHERE c.id = e.target_chunk_id))",
    "SELECT NOT EXISTS (SELECT 1 FROM documents d WHERE d.chunk_count <> "
    "(SELECT count(*) FROM document_chunks c WHERE c.document_id = d.id))",
)


def _statistics_hold(engine: Engine) -> list[bool]:
    with engine.connect() as conn:
        return [bool(conn.execute(text(statement)).scalar_one()) for statement in _STATISTICS_HOLD]


@pytest.mark.parametrize(
    ("partitioned", "beside"),
    [(False, False), (True, False), (False, True), (True, True)],
    ids=["alone", "partitioned", "beside-another-collection", "partitioned-beside-another-collection"],
)
def test_a_bulk_reindex_ends_as_a_first_index_table_by_table(
    corpus, database_factory, settings, partitioned, beside, monkeypatch
):
    reindexed = _fresh(database_factory, settings, partitioned=partitioned)
    reference = _fresh(database_factory, settings, partitioned=partitioned)
    rechunked = _rechunked(settings)
    try:
        for engine in (reindexed, reference) if beside else ():
            assert _indexer(engine, settings, bulk=False).index_paths([corpus / "faq.txt"], collection="other").ok
        first = _indexer(reindexed, settings, bulk=False).index_paths([corpus], collection="kb")
        assert first.ok
        before = dump(reindexed)
        position = _chunk_position(reindexed)
        phases: list[str] = []
        cleared: list[str] = []
        clear = bulk_module.clear_replaced

        def spy(*args: Any, **kwargs: Any) -> str:
            cleared.append(clear(*args, **kwargs))
            return cleared[-1]

        monkeypatch.setattr(bulk_module, "clear_replaced", spy)
        monkeypatch.setattr(Progress, "phase", lambda self, name: phases.append(name))
        report = _indexer(reindexed, rechunked, bulk=True).reindex_all(collection="kb")
        monkeypatch.undo()
        pages = len(TOPICS) + 2  # and faq.txt, client.py
        assert report.ok and (report.added, report.updated) == (0, pages)
        assert cleared == ["deleted" if beside else "truncated"]
        # alone on a plain table the indexes are rebuilt after the load; beside others they are kept
        assert ("build index ix_document_chunks_embedding_hnsw" in phases) is not (partitioned or beside)

        with reference.connect() as conn, conn.begin():
            conn.execute(text(f"SELECT setval({_CHUNK_SEQUENCE}, :position)"), {"position": position})
        assert _indexer(reference, rechunked, bulk=False).index_paths([corpus], collection="kb").ok

        reindexed_state, reference_state = dump(reindexed), dump(reference)
        # the reindex changed what it covers: other chunks, other ids, all old rows gone
        assert len(reindexed_state["document_chunks"]) > len(before["document_chunks"])
        kb_chunks = [set(_kb_chunk_ids(state)) for state in (before, reindexed_state)]
        assert kb_chunks[0] and kb_chunks[1] and kb_chunks[0].isdisjoint(kb_chunks[1])
        assert reindexed_state["bm25_packed_lists"], "no packed postings after the reindex"
        differing = [table for table in reference_state if reindexed_state[table] != reference_state[table]]
        for table in differing:
            assert reindexed_state[table] == reference_state[table], f"{table} (of {differing})"
        with reindexed.connect() as conn:
            assert conn.execute(_LOAD_SCHEMAS).scalar_one() == 0
    finally:
        reindexed.dispose()
        reference.dispose()


def test_a_document_the_bulk_reindex_cannot_rewrite_keeps_its_previous_version(
    corpus, database_factory, settings, monkeypatch
):
    engine = _fresh(database_factory, settings)
    try:
        assert _indexer(engine, settings, bulk=False).index_paths([corpus], collection="kb").ok
        before = dump(engine)
        prepare = Batch._prepare

        def refuse_one(self: Batch, source: str, *args: Any, **kwargs: Any) -> None:
            if source.endswith("search.md"):
                raise DocumentReadError(f"{source}: could not be chunked")
            prepare(self, source, *args, **kwargs)

        monkeypatch.setattr(Batch, "_prepare", refuse_one)
        report = _indexer(engine, _rechunked(settings), bulk=True).reindex_all(collection="kb")
        assert [p.source for p in report.failed] == ["docs/search.md"]
        assert report.updated == len(TOPICS) + 1  # every other page, faq.txt and client.py
        after = dump(engine)
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT id FROM documents WHERE source = 'docs/search.md'")).scalar_one()
        for table, document_column in (("document_chunks", 1), ("document_contexts", 1), ("documents", 0)):
            keep = [r for r in before[table] if r[document_column] == str(kept)]
            assert keep and keep == [r for r in after[table] if r[document_column] == str(kept)], table
        assert len(after["document_chunks"]) > len(before["document_chunks"])  # the others were rewritten
        assert _statistics_hold(engine) == [True] * len(_STATISTICS_HOLD)
    finally:
        engine.dispose()


def test_a_failing_bulk_reindex_leaves_the_database_as_it_was(corpus, database_factory, settings, monkeypatch):
    engine = _fresh(database_factory, settings)
    try:
        packed = dataclasses.replace(settings, bm25_packed_min_chunks=1)  # its packed postings survive too
        assert _indexer(engine, packed, bulk=False).index_paths([corpus], collection="kb").ok
        assert _statistics_hold(engine) == [True] * len(_STATISTICS_HOLD)
        before = dump(engine)
        fail_after_finish(monkeypatch)
        report = _indexer(engine, _rechunked(settings), bulk=True).reindex_all(collection="kb")
        assert report.updated == 0
        assert_as_it_was(engine, before, report)
    finally:
        engine.dispose()


@pytest.mark.parametrize("beside", [True, False], ids=["beside-another-collection", "alone"])
def test_readers_see_the_old_collection_until_the_bulk_reindex_commits(
    corpus, database_factory, settings, monkeypatch, beside
):
    engine = _fresh(database_factory, settings)
    try:
        if beside:
            assert _indexer(engine, settings, bulk=False).index_paths([corpus / "faq.txt"], collection="other").ok
        assert _indexer(engine, settings, bulk=False).index_paths([corpus], collection="kb").ok
        old = _chunk_ids(engine)
        seen: list[Any] = []
        commit = BulkWriter.commit

        def read_then_commit(self: BulkWriter) -> None:  # everything is written, nothing committed yet
            with engine.connect() as reader:
                reader.execute(text("SET lock_timeout = '1s'"))
                try:
                    seen.append(set(reader.execute(_KB_CHUNKS).scalars()))
                except OperationalError as exc:  # the truncated tables are locked until the commit
                    seen.append(type(exc.orig).__name__)
            commit(self)

        monkeypatch.setattr(BulkWriter, "commit", read_then_commit)
        assert _indexer(engine, _rechunked(settings), bulk=True).reindex_all(collection="kb").ok
        new = _chunk_ids(engine)
        # beside another collection the old rows are deleted in the load's transaction: readers see them whole;
        # alone they are truncated: readers wait for the commit (here: refused by their lock timeout), never torn
        assert seen == ([old] if beside else ["LockNotAvailable"])
        assert new and new.isdisjoint(old)
    finally:
        engine.dispose()


_KB_CHUNKS = text("SELECT id FROM document_chunks WHERE collection = 'kb'")


def _chunk_ids(engine: Engine) -> set[int]:
    with engine.connect() as conn:
        return set(conn.execute(_KB_CHUNKS).scalars())
