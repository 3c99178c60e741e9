"""The idf-weighted share of a question's lexemes a chunk holds (``db.coverage``), against a reference computed
from the stored tsvectors and statistics, and its part in the relevance floor (``retrieve.relevance.finalize``)."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import text

from rag_service.db.coverage import best_held_share
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import TEXTS


def reference_share(connection, chunk_id: int, words: str) -> float:  # type: ignore[no-untyped-def]
    n = connection.execute(text("SELECT chunk_count FROM collection_stats WHERE collection = 'one'")).scalar()
    lexemes = set(
        connection.execute(text("SELECT tsvector_to_array(to_tsvector('english', :q))"), {"q": words}).scalar()
    )
    df = dict(connection.execute(text("SELECT lexeme, doc_freq FROM lexeme_stats WHERE collection = 'one'")).all())
    held = set(
        connection.execute(
            text("SELECT tsvector_to_array(content_tsv) FROM document_chunks WHERE id = :i"), {"i": chunk_id}
        ).scalar()
    )
    idf = {x: math.log(1 + (n - df.get(x, 0) + 0.5) / (df.get(x, 0) + 0.5)) for x in lexemes}
    return sum(v for x, v in idf.items() if x in held) / sum(idf.values())


@pytest.mark.parametrize("words", ["replica log replay", "backups restored nightly", "replica zebra quokka"])
def test_the_share_equals_the_reference(db, settings, connection, words):
    Indexer(db, HashingEmbedder(), settings).index_texts([(n, n, b) for n, b in TEXTS.items()], collection="one")
    ids = list(
        connection.execute(text("SELECT id FROM document_chunks WHERE collection = 'one' ORDER BY id")).scalars()
    )
    expected = [reference_share(connection, i, words) for i in ids]
    assert max(expected) > 0, "some chunk holds a word of the question"
    with db.transaction() as session:
        for chunk_id, share in zip(ids, expected, strict=True):
            got = best_held_share(session, collection="one", fts_config="english", words=words, chunk_ids=[chunk_id])
            assert got == pytest.approx(share, rel=1e-9)
        best = best_held_share(session, collection="one", fts_config="english", words=words, chunk_ids=ids)
        assert best == pytest.approx(max(expected), rel=1e-9)
        # words the collection lacks weigh the most: a question of unknown words is held by nothing
        assert (
            best_held_share(session, collection="one", fts_config="english", words="zebra quokka", chunk_ids=ids) == 0
        )
        assert best_held_share(session, collection="one", fts_config="english", words="the of", chunk_ids=ids) == 0
        assert best_held_share(session, collection="none", fts_config="english", words=words, chunk_ids=ids) == 0
        assert best_held_share(session, collection="one", fts_config="english", words=words, chunk_ids=[]) == 0
