"""The hybrid statement's plan does not depend on statistics being current (issue 23, point 0).

A collection the planner's statistics do not know yet (estimated at one row) must not turn the
statement into a nested loop that re-runs an arm per outer row: each arm runs once, and an ingest
that creates a collection refreshes the statistics.
"""

from __future__ import annotations

import random
import re

import pytest
from sqlalchemy import text

from rag_service.db import graph as graph_store
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.search import SearchRequest, explain
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from rag_service.retrieve.query import bm25_text, parse_query, websearch_parts

pytestmark = pytest.mark.slow  # ~1,400 chunks indexed once for the module: a long run (`make test`)

WORDS = [
    "postgres",
    "vector",
    "index",
    "search",
    "fusion",
    "rank",
    "query",
    "token",
    "chunk",
    "parent",
    "header",
    "section",
    "model",
    "replica",
]
TABLES = (
    "documents",
    "document_chunks",
    "chunk_terms",
    "lexeme_stats",
    "collection_stats",
    "document_contexts",
    "context_terms",
    "chunk_edges",
)

#: the new collection's rows, copied by SQL from ``known`` so no ingest (and no ANALYZE) runs
COPY_COLLECTION = (
    """
CREATE TEMP TABLE doc_map ON COMMIT DROP AS
    SELECT id AS old_id, nextval(pg_get_serial_sequence('documents', 'id')) AS new_id
    FROM documents WHERE collection = :source""",
    """
INSERT INTO documents (id, collection, source, title, content, content_hash, chunker, chunk_count, metadata)
    SELECT m.new_id, :target, d.source, d.title, d.content, d.content_hash, d.chunker, d.chunk_count, d.metadata
    FROM documents d JOIN doc_map m ON m.old_id = d.id WHERE d.collection = :source""",
    """
INSERT INTO document_chunks (document_id, collection, chunk_index, chunk_type, content, parent_content,
        parent_start, parent_end, headers, header_path, start_char, end_char, token_count, content_hash,
        embedding, content_tsv, metadata)
    SELECT m.new_id, :target, c.chunk_index, c.chunk_type, c.content, c.parent_content, c.parent_start,
        c.parent_end, c.headers, c.header_path, c.start_char, c.end_char, c.token_count, c.content_hash,
        c.embedding, c.content_tsv, c.metadata
    FROM document_chunks c JOIN doc_map m ON m.old_id = c.document_id WHERE c.collection = :source""",
)


def _texts(n: int) -> list[tuple[str, str, str]]:
    rng = random.Random(23)
    items = []
    for i in range(n):
        paragraphs = [" ".join(rng.choices(WORDS, k=40)).capitalize() + "." for _ in range(12)]
        items.append((f"doc{i:04d}.md", f"Doc {i}", f"# Doc {i}\n\n" + "\n\n".join(paragraphs)))
    return items


def _request(embedder: HashingEmbedder, collection: str, query: str) -> SearchRequest:
    parsed = parse_query(query)
    any_terms, required = websearch_parts(parsed)
    return SearchRequest(
        collection=collection,
        query_vector=embedder.embed_query(query),
        any_terms=any_terms,
        required_terms=required,
        bm25_text=bm25_text(parsed),
        vector_weight=0.7,
        keyword_weight=0.3,
        candidate_k=40,
        limit=40,
    )


def arm_loops(plan: str) -> list[int]:
    """The ``loops`` of every window aggregate in an ``EXPLAIN ANALYZE`` text: each arm ranks and
    normalises its candidates with window functions over all of them, once per run of the arm
    (the only other ones, the BM25 budget's, are inside the keyword arm), whether its CTE is materialised or inlined."""
    found = (re.search(r"loops=(\d+)", line) for line in plan.splitlines() if "WindowAgg" in line)
    return [int(m.group(1)) for m in found if m]


@pytest.fixture(scope="module")
def stale_database(database_factory, settings):
    """``known``, indexed and analysed; ``fresh``, copied in by SQL after the last ANALYZE, so the
    statistics do not know it (autovacuum off for the tables, as when its rows are under the
    autoanalyze threshold of a large database). Made once for the module (18 s of ingest): the first
    test only reads it; the second's ingest analyses every table, so it runs second (file order; the
    first checks that the statistics still do not know ``fresh``)."""
    engine = make_engine(database_factory.create("rag_fresh"), settings)
    migrate.upgrade(engine)
    fresh_database = Database(engine)
    with fresh_database.transaction() as session:
        for table in TABLES:
            session.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
    embedder = HashingEmbedder()
    report = Indexer(fresh_database, embedder, settings).index_texts(_texts(120), collection="known")
    assert report.failed == []
    with fresh_database.transaction() as session:
        session.execute(text(f"ANALYZE {', '.join(TABLES)}"))
        for statement in COPY_COLLECTION:
            session.execute(text(statement), {"source": "known", "target": "fresh"})
    yield fresh_database, embedder
    engine.dispose()


def test_each_arm_runs_once_for_a_collection_the_statistics_do_not_know(stale_database):
    db, embedder = stale_database
    with db.transaction() as session:
        chunks = dict(session.execute(text("SELECT collection, count(*) FROM document_chunks GROUP BY 1")).all())
        assert chunks["fresh"] == chunks["known"] > 500
        known = session.execute(
            text(
                "SELECT most_common_vals::text FROM pg_stats "
                "WHERE tablename = 'document_chunks' AND attname = 'collection'"
            )
        ).scalar_one()
        assert known == "{known}", "precondition: the statistics do not know 'fresh' (no ANALYZE since the copy)"
        for collection in ("known", "fresh"):
            plan = explain(session, _request(embedder, collection, "replica index fusion"), analyze=True)
            loops = arm_loops(plan)
            assert len(loops) >= 4, plan  # two per arm at least
            assert set(loops) == {1}, f"{collection}: an arm ran {max(loops)} times\n{plan}"


def test_an_ingest_that_creates_a_collection_refreshes_the_statistics(stale_database, settings):
    db, embedder = stale_database
    report = Indexer(db, embedder, settings).index_texts(_texts(30), collection="another")
    assert report.failed == []
    # what the planner reads: pg_stats (written by ANALYZE in its transaction). pg_stat_user_tables'
    # n_mod_since_analyze is not: other backends flush their pending counts up to a second late, after the
    # ANALYZE had reset it (seen: 120 documents "modified" since an ANALYZE that had run)
    with db.transaction() as session:
        known = dict(
            session.execute(
                text(
                    "SELECT tablename, most_common_vals::text FROM pg_stats "
                    "WHERE tablename = ANY(:t) AND attname = 'collection'"
                ),
                {"t": ["documents", "document_chunks", "chunk_terms", "chunk_edges"]},
            ).all()
        )
    assert set(known) == {"documents", "document_chunks", "chunk_terms", "chunk_edges"}
    for table, values in known.items():
        assert {"known", "another"} <= set(values.strip("{}").split(",")), (table, values)
    # the graph walk steps from each seed through its own edges alone (by the edges' key), not every edge of
    # the collection filtered: what a plan on statistics from before the collection did
    with db.transaction() as session:
        first = "SELECT id FROM document_chunks WHERE collection = 'another' ORDER BY id LIMIT 10"
        seeds = session.scalars(text(first))
        params = {"collection": "another", "seeds": list(seeds), "per_node": 12}
        plan = "\n".join(session.scalars(text(f"EXPLAIN (ANALYZE) {graph_store.NEIGHBOURHOOD_SQL}"), params))
    # and the new collection's postings are read index-only without fetching each row (the ingest's VACUUM)
    with db.transaction() as session:
        keyword_plan = explain(session, _request(embedder, "another", "replica index fusion"), analyze=True)
    lines = keyword_plan.splitlines()
    fetches = [
        next(line for line in lines[i:] if "Heap Fetches" in line)
        for i, line in enumerate(lines)
        if "Index Only Scan" in line and " on chunk_terms" in line
    ]
    assert fetches and all(line.split()[-1] == "0" for line in fetches), keyword_plan
    conditions = [line for line in plan.splitlines() if "Index Cond" in line]
    assert conditions and all("source_chunk_id = " in line for line in conditions), plan
    assert "Rows Removed by Filter" not in plan, plan


def test_a_small_new_collection_beside_a_large_one_is_left_to_autoanalyze(fresh_database, settings):
    """Each new collection's ingest analysed every planned table: 3.8 s beside 68,000 chunks for a 60-chunk
    collection whose plans do not depend on it (a team creating hundreds of them paid it each time). A collection
    under ``PLANNED_MIN_CHUNKS`` and under ``PLANNED_TABLE_SHARE`` of the chunks is left to autoanalyze; one
    reaching the share is analysed as before."""
    from sqlalchemy import event

    from rag_service.db import statistics

    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    assert indexer.index_texts(_texts(40), collection="large").ok  # analysed: the first collection is all of it
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        sent.append(statement)

    event.listen(fresh_database.engine, "before_cursor_execute", record)
    try:
        small = [("note.md", "Note", "# Note\n\nA replica keeps a copy of the index.")]
        assert indexer.index_texts(small, collection="small").ok
        assert not [s for s in sent if s.startswith("ANALYZE")], "a one-chunk collection beside 480 analysed"
        sent.clear()
        assert indexer.index_texts(_texts(8), collection="share").ok  # ~100 chunks: over 1% of the table
        assert [s for s in sent if s.startswith("ANALYZE")], "a collection over the share was not analysed"
    finally:
        event.remove(fresh_database.engine, "before_cursor_execute", record)
    assert statistics.PLANNED_MIN_CHUNKS > 100
