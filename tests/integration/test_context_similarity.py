"""The context similarity (``db.search``): each hit's query cosine with the mean vector of its context (its
section, or its document without sections), equal to a reference computed from the stored vectors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sqlalchemy import text

from rag_service.config import Settings
from rag_service.db.context_vector import CONTEXT_REACH
from rag_service.db.search import hybrid_search, vector_from_send
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import keyword_request

SECTIONS = "\n\n".join(
    f"## Part {i}\n\n" + " ".join(f"Sentence {j} of part {i} on replicas, backups and failover." for j in range(12))
    for i in range(3)
)
PLAIN = " ".join(f"Plain sentence {j} about the log and its replay." for j in range(30))
# a document without sections longer than a hit's reach on both sides: its hits read the chunks around them
LONG = " ".join(f"Journal line {j} keeps {'entries' if j % 7 else 'records'} in order." for j in range(2400))


def reference(connection, hit, query_vector: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    """The cosine with the mean of the stored vectors of the hit's context within ``CONTEXT_REACH`` of it."""
    rows = connection.execute(
        text(
            "SELECT vector_send(c.embedding) FROM document_chunks c, document_chunks h WHERE h.id = :i "
            "AND c.collection = 'one' AND c.document_id = h.document_id "
            "AND coalesce(c.parent_start, -1) = coalesce(h.parent_start, -1) "
            "AND abs(c.chunk_index - h.chunk_index) <= :r"
        ),
        {"i": hit.chunk_id, "r": CONTEXT_REACH},
    ).scalars()
    mean = np.mean([vector_from_send(r).astype(np.float64) for r in rows], axis=0)
    query = query_vector.astype(np.float64)
    return float(mean @ query / (np.linalg.norm(mean) * np.linalg.norm(query)))


def test_context_similarity_equals_the_reference(db, connection):
    settings = Settings(database_url=None, chunk_size=200, chunk_overlap=0)
    embedder = HashingEmbedder()
    indexer = Indexer(db, embedder, settings)
    indexer.index_texts([("s.md", "s.md", SECTIONS)], collection="one", strategy="markdown")
    indexer.index_texts([("p.txt", "p.txt", PLAIN), ("long.txt", "long.txt", LONG)], collection="one")
    counts = connection.execute(
        text("SELECT count(*) FROM document_chunks WHERE collection = 'one' GROUP BY document_id, parent_start")
    ).scalars()
    assert max(counts) > 2 * CONTEXT_REACH + 1, "a context longer than a hit reads"
    sources = set()
    for query in ("replica failover", "log replay", "journal entries"):
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
        request = replace(keyword_request(query), query_vector=vector, vector_weight=0.5, keyword_weight=0.5)
        with db.transaction() as session:
            hits = hybrid_search(session, replace(request, context_vector=True))
            plain = hybrid_search(session, request)
        for hit in hits:
            assert hit.context_similarity == pytest.approx(reference(connection, hit, vector), abs=1e-6)
        assert all(h.context_similarity is None for h in plain)
        sources |= {(h.source, h.parent_start is None) for h in hits}
    assert sources == {("s.md", False), ("p.txt", True), ("long.txt", True)}, "hits in sections, a document, a long one"
