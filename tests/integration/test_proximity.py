"""Term proximity (``db.proximity``): per hit chunk, over each pair of the question's lexemes it holds,
``w_a * w_b / distance`` of their nearest occurrences; equal to a reference computed from the stored tsvectors,
and ranked after fusion with its weight (``retrieve.context.add_context``)."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import text

from rag_service.db.search import hybrid_search
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import TEXTS, keyword_request

K1 = 1.2


def reference_proximity(connection, chunk_id: int, query: str) -> float:  # type: ignore[no-untyped-def]
    """The proximity of ``chunk_id`` from its stored tsvector's positions and the collection's statistics."""
    n = connection.execute(text("SELECT chunk_count FROM collection_stats WHERE collection = 'one'")).scalar()
    lexemes = connection.execute(text("SELECT tsvector_to_array(to_tsvector('english', :q))"), {"q": query}).scalar()
    df = dict(
        connection.execute(
            text("SELECT lexeme, doc_freq FROM lexeme_stats WHERE collection = 'one' AND lexeme = ANY(:l)"),
            {"l": lexemes},
        ).all()
    )
    held = dict(
        connection.execute(
            text("SELECT u.lexeme, u.positions FROM document_chunks c, unnest(c.content_tsv) u WHERE c.id = :i"),
            {"i": chunk_id},
        ).all()
    )
    found = sorted(x for x in df if x in held)
    weight = {x: math.log(1 + (n - df[x] + 0.5) / (df[x] + 0.5)) * (K1 + 1) for x in found}
    total = 0.0
    for i, a in enumerate(found):
        for b in found[i + 1 :]:
            distance = min(abs(p - q) for p in held[a] for q in held[b])
            total += weight[a] * weight[b] / max(distance, 1)
    return total


@pytest.mark.parametrize("query", ["replica log replay", "the replica replays the log", "backups restored nightly"])
def test_proximity_equals_the_reference(db, settings, connection, query):
    Indexer(db, HashingEmbedder(), settings).index_texts([(n, n, b) for n, b in TEXTS.items()], collection="one")
    with db.transaction() as session:
        hits = hybrid_search(session, keyword_request(query, proximity=True, bm25_max_postings=0))
    assert hits
    scores = {h.chunk_id: h.proximity_score for h in hits}
    assert any(score > 0 for score in scores.values()), "some chunk holds two of the words"
    for chunk_id, score in scores.items():
        assert score == pytest.approx(reference_proximity(connection, chunk_id, query), rel=1e-9)
    with db.transaction() as session:
        plain = hybrid_search(session, keyword_request(query, bm25_max_postings=0))
    assert all(h.proximity_score is None for h in plain)
