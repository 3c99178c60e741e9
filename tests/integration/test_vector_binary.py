"""Vectors travel in pgvector's binary form both ways (``db.vector_type``): written, looked up, queried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pgvector import Vector
from sqlalchemy import event, text

from rag_service.db.database import Database
from rag_service.db.documents import stored_embeddings
from rag_service.db.search import hybrid_search
from rag_service.db.vector_type import PackedVector, vector_from_send
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import keyword_request


def test_a_packed_vector_is_pgvectors_binary_form_and_the_server_reads_it_exactly(db: Database) -> None:
    values = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    values[:3] = [np.float32(1) / 3, np.finfo(np.float32).tiny, -np.finfo(np.float32).max]
    packed = PackedVector(values)
    assert packed.data == Vector(values).to_binary()
    with db.transaction() as session:
        row = session.execute(
            text("SELECT vector_send(CAST(:v AS vector)), CAST(:v AS vector)::text, vector_dims(CAST(:v AS vector))"),
            {"v": packed},
        ).one()
    assert bytes(row[0]) == packed.data
    assert np.array_equal(vector_from_send(bytes(row[0])), values)
    assert np.array_equal(np.asarray(Vector.from_text(row[1]).to_numpy(), dtype=np.float32), values)
    assert row[2] == 384


def test_a_vector_of_another_dimension_is_refused(db: Database) -> None:
    with pytest.raises(Exception, match="expected 384 dimensions, not 3"), db.transaction() as session:
        session.execute(text("SELECT CAST(:v AS vector(384))"), {"v": PackedVector(np.ones(3, np.float32))})


def test_vectors_are_sent_and_read_in_binary(fresh_database: Database, settings, tmp_path: Path) -> None:
    sent: list[Any] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        batches = parameters if executemany else [parameters]
        sent.extend(v for p in batches if isinstance(p, dict) for v in p.values() if isinstance(v, PackedVector | str))

    (tmp_path / "ops.md").write_text("# Operations\n\n## Restores\n\nBackups restore the primary from a base copy.\n")
    embedder = HashingEmbedder()
    event.listen(fresh_database.engine, "before_cursor_execute", record)
    try:
        report = Indexer(fresh_database, embedder, settings).index_paths([tmp_path], collection="one")
        assert report.failed == [] and report.added == 1
        written = [v for v in sent if isinstance(v, PackedVector)]
        assert written, "the chunk INSERT bound its vector as text"
        assert not [v for v in sent if isinstance(v, str) and v.startswith("[")], "a vector went as text"
        with fresh_database.transaction() as session:
            hashes = list(session.execute(text("SELECT content_hash FROM document_chunks")).scalars())
            stored = stored_embeddings(session, collection="one", hashes=hashes)
            raw = dict(session.execute(text("SELECT content_hash, vector_send(embedding) FROM document_chunks")).all())
            assert {h: v.tobytes() for h, v in stored.items()} == {h: vector_from_send(raw[h]).tobytes() for h in raw}
            sent.clear()
            query = embedder.embed_query("restore the primary")
            request = keyword_request("restore the primary", query_vector=query, vector_weight=0.7)
            hits = hybrid_search(session, request)
        assert hits and any(isinstance(v, PackedVector) for v in sent), "the query vector went as text"
        assert all(isinstance(h.embedding, np.ndarray) and h.embedding.dtype == np.float32 for h in hits)
    finally:
        event.remove(fresh_database.engine, "before_cursor_execute", record)


def test_a_failing_lookup_of_other_collections_embeds_instead_of_failing_the_ingest(
    fresh_database: Database, settings, tmp_path: Path, monkeypatch, caplog
) -> None:
    """On Citus that lookup reaches every shard, so one worker down failed the ingest into every collection (audit
    51d): here it fails with a real server error, in a savepoint, and the texts are embedded instead."""
    from rag_service.db import documents as repo

    (tmp_path / "ops.md").write_text("# Operations\n\n## Restores\n\nBackups restore the primary from a base copy.\n")
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    assert indexer.index_paths([tmp_path], collection="one").added == 1
    real = repo._first_vectors

    def shard_down(session, statement):  # type: ignore[no-untyped-def]
        if "collection_stats" in str(statement):  # the other collections' branch
            session.execute(text("SELECT 1 / 0"))  # a server error: the transaction is aborted without a savepoint
        return real(session, statement)

    monkeypatch.setattr(repo, "_first_vectors", shard_down)
    report = indexer.index_paths([tmp_path], collection="two")
    assert report.ok and report.added == 1 and report.embeddings_reused == 0 and report.chunks_embedded > 0
    assert any("vectors of other collections not reused" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(repo, "_first_vectors", real)
    assert indexer.index_paths([tmp_path], collection="three").embeddings_reused > 0, "reused again once it works"
