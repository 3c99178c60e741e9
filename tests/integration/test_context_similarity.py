"""The context similarity (``db.context_vector``): each hit's query cosine with the stored mean vector of its
context (its section, or its document without sections), equal to a reference computed from the chunks' vectors;
none for a chunk without a stored context."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sqlalchemy import text

from rag_service.config import Settings
from rag_service.db import contexts
from rag_service.db.search import hybrid_search
from rag_service.db.vector_type import vector_from_send
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import keyword_request

SECTIONS = "\n\n".join(
    f"## Part {i}\n\n" + " ".join(f"Sentence {j} of part {i} on replicas, backups and failover." for j in range(12))
    for i in range(3)
)
PLAIN = " ".join(f"Plain sentence {j} about the log and its replay." for j in range(30))
# longer than the test's context limit: no stored context, so no similarity
LONG = " ".join(f"Long sentence {j} about the replay of a log." for j in range(80))


# the hit's context's chunks, when the context is stored (a chunk without one has none)
_CONTEXT_CHUNKS = """
SELECT vector_send(c.embedding) FROM document_chunks c
JOIN document_contexts x ON x.collection = c.collection AND x.document_id = c.document_id
    AND x.context_start = coalesce(c.parent_start, -1)
WHERE c.collection = 'one' AND c.document_id = :d AND coalesce(c.parent_start, -1) = coalesce(CAST(:p AS integer), -1)
"""


def reference(connection, hit, query_vector: np.ndarray) -> float | None:  # type: ignore[no-untyped-def]
    """The cosine with the mean of the stored vectors of the hit's context's chunks; None without a context."""
    rows = connection.execute(text(_CONTEXT_CHUNKS), {"d": hit.document_id, "p": hit.parent_start}).scalars().all()
    if not rows:
        return None
    mean = np.mean([vector_from_send(r).astype(np.float64) for r in rows], axis=0)
    query = query_vector.astype(np.float64)
    return float(mean @ query / (np.linalg.norm(mean) * np.linalg.norm(query)))


def test_context_similarity_equals_the_reference(db, connection, monkeypatch):
    monkeypatch.setattr(contexts, "MAX_CONTEXT_CHARS", 2500)
    settings = Settings(database_url=None, chunk_size=200, chunk_overlap=0)
    embedder = HashingEmbedder()
    indexer = Indexer(db, embedder, settings)
    indexer.index_texts([("s.md", "s.md", SECTIONS)], collection="one", strategy="markdown")
    indexer.index_texts([("p.txt", "p.txt", PLAIN), ("long.txt", "long.txt", LONG)], collection="one")
    counts = connection.execute(
        text("SELECT count(*) FROM document_chunks WHERE collection = 'one' GROUP BY document_id, parent_start")
    ).scalars()
    assert max(counts) > 2, "contexts of several chunks"
    seen = set()
    for query in ("replica failover", "log replay"):
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
        request = replace(keyword_request(query), query_vector=vector, vector_weight=0.5, keyword_weight=0.5)
        with db.transaction() as session:
            hits = hybrid_search(session, replace(request, context_vector=True))
            plain = hybrid_search(session, request)
            alone = hybrid_search(session, replace(request, context_vector=True, keyword_weight=0.0))
        for hit in hits:
            expected = reference(connection, hit, vector)
            if expected is None:
                assert hit.context_similarity is None
            else:
                assert hit.context_similarity == pytest.approx(expected, abs=1e-6)
            seen.add((hit.source, hit.parent_start is None, expected is None))
        assert all(h.context_similarity is None for h in plain)
        assert alone and all(h.context_similarity is None for h in alone), "the vector arm alone: not computed"
    assert {("s.md", False, False), ("p.txt", True, False), ("long.txt", True, True)} <= seen, (
        "hits in sections, in a document without sections, in one too long for a stored context"
    )
