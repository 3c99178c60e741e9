"""A collection rewritten again and again keeps its postings' indexes bounded.

An ingest that rewrote 10% of a collection VACUUMs the tables read index-only (``settle_after_write``). With
``INDEX_CLEANUP OFF`` that VACUUM left every dead row's index entries in place and reset the dead-row count autovacuum
goes by, so autovacuum never cleaned them either: a collection re-indexed every ~12 s grew ``pk_chunk_terms`` to 30x
its rows' size and on (88 -> 101 MB in 9 more runs, 49k postings).
"""

from __future__ import annotations

import random

from sqlalchemy import text

from rag_service.db.database import Database
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer

WORDS = [f"term{n}" for n in range(3000)]
INDEXES = ("pk_chunk_terms", "ix_chunk_terms_impact")


def _documents(run: int) -> list[tuple[str, str, str]]:
    pick = random.Random(run)
    return [
        (f"notes/doc{i}.md", f"Doc {i}", f"# Doc {i}\n\n" + " ".join(pick.choice(WORDS) for _ in range(300)))
        for i in range(10)
    ]


def _sizes(db: Database) -> dict[str, int]:
    with db.engine.connect() as conn:
        return {
            name: conn.execute(text("SELECT pg_relation_size(CAST(:n AS regclass))"), {"n": name}).scalar_one()
            for name in INDEXES
        }


def test_a_collection_rewritten_again_and_again_keeps_its_postings_indexes_bounded(fresh_database, settings):
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    for run in range(3):
        indexer.index_texts(_documents(run), collection="upkeep", strategy="markdown")
    settled = _sizes(fresh_database)
    for run in range(3, 15):  # every document changed: each run rewrites the whole collection and settles it
        indexer.index_texts(_documents(run), collection="upkeep", strategy="markdown")
    grown = _sizes(fresh_database)
    for name in INDEXES:
        assert grown[name] < 2 * settled[name], f"{name} grew from {settled[name]} to {grown[name]} bytes in 12 runs"
