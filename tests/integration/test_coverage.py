"""The idf-weighted share of a question's lexemes a chunk holds (``db.coverage``), against a reference computed
from the stored tsvectors and statistics, and its part in the relevance floor (``retrieve.relevance.finalize``)."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import text

from rag_service.db.coverage import held_shares
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
        shares = held_shares(session, collection="one", fts_config="english", words=words, chunk_ids=ids)
        assert list(shares) == ids
        for chunk_id, share in zip(ids, expected, strict=True):
            assert shares[chunk_id] == pytest.approx(share, rel=1e-9)

        def best(words: str, collection: str = "one", chunk_ids: list[int] = ids) -> float:
            found = held_shares(session, collection=collection, fts_config="english", words=words, chunk_ids=chunk_ids)
            return max(found.values(), default=0.0)

        # words the collection lacks weigh the most: a question of unknown words is held by nothing
        assert best("zebra quokka") == 0
        assert best("the of") == 0
        assert best(words, collection="none") == 0
        assert best(words, chunk_ids=[]) == 0
        assert best(words, chunk_ids=[-1]) == 0  # a chunk that is not there holds nothing
