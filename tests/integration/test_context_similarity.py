"""The context similarity (``db.search``): each hit's query cosine with the mean vector of its context (its
section, or its document without sections), equal to a reference computed from the stored vectors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sqlalchemy import text

from rag_service.config import Settings
from rag_service.db.search import hybrid_search, vector_from_send
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import keyword_request

SECTIONS = "\n\n".join(
    f"## Part {i}\n\n" + " ".join(f"Sentence {j} of part {i} on replicas, backups and failover." for j in range(12))
    for i in range(3)
)
PLAIN = " ".join(f"Plain sentence {j} about the log and its replay." for j in range(30))


def reference(connection, hit, query_vector: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    rows = connection.execute(
        text(
            "SELECT vector_send(embedding) FROM document_chunks WHERE collection = 'one' AND document_id = :d "
            "AND coalesce(parent_start, -1) = coalesce(CAST(:p AS integer), -1)"
        ),
        {"d": hit.document_id, "p": hit.parent_start},
    ).scalars()
    mean = np.mean([vector_from_send(r).astype(np.float64) for r in rows], axis=0)
    query = query_vector.astype(np.float64)
    return float(mean @ query / (np.linalg.norm(mean) * np.linalg.norm(query)))


@pytest.mark.parametrize("query", ["replica failover", "log replay"])
def test_context_similarity_equals_the_reference(db, connection, query):
    settings = Settings(database_url=None, chunk_size=200, chunk_overlap=0)
    embedder = HashingEmbedder()
    indexer = Indexer(db, embedder, settings)
    indexer.index_texts([("s.md", "s.md", SECTIONS)], collection="one", strategy="markdown")
    indexer.index_texts([("p.txt", "p.txt", PLAIN)], collection="one")
    vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
    request = replace(keyword_request(query), query_vector=vector, vector_weight=0.5, keyword_weight=0.5)
    with db.transaction() as session:
        hits = hybrid_search(session, replace(request, context_vector=True))
    assert {h.parent_start is None for h in hits} == {True, False}, "hits in sections and in the plain document"
    counts = connection.execute(
        text("SELECT count(*) FROM document_chunks WHERE collection = 'one' GROUP BY document_id, parent_start")
    ).scalars()
    assert max(counts) > 1, "contexts of several chunks"
    for hit in hits:
        assert hit.context_similarity == pytest.approx(reference(connection, hit, vector), abs=1e-6)
    with db.transaction() as session:
        assert all(h.context_similarity is None for h in hybrid_search(session, request))
