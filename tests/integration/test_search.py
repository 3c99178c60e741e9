"""The hybrid SQL: HNSW use, iterative scans, keyword matching, SQL/Python fusion agreement, safety."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.orm import Session

from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.models import DocumentChunk
from rag_service.db.search import ChunkFilters, SearchRequest, explain, hybrid_search
from rag_service.embed import HashingEmbedder
from rag_service.errors import UnknownFilterError
from rag_service.ingest.indexer import Indexer
from rag_service.retrieve.query import bm25_text, parse_query, websearch_parts
from tests.fusion_reference import linear_fuse, rrf_fuse
from tests.integration.test_bm25 import stored_reference_bm25

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
    "embedding",
    "database",
    "cluster",
    "replica",
    "backup",
    "restore",
    "schema",
    "migration",
    "table",
    "column",
    "filter",
    "score",
    "relevance",
]


@pytest.fixture(scope="module")
def indexed_engine(database_factory, settings, tmp_path_factory) -> Iterator[Engine]:
    """150 generated documents in collection 'c' (hashing embedder: no model needed), indexed once for
    the module and committed in a database of its own; each test runs in a rolled-back transaction on it."""
    engine = make_engine(database_factory.create("rag_search"), settings)
    migrate.upgrade(engine)
    root = tmp_path_factory.mktemp("search")
    (root / ".git").mkdir()  # a checkout: sources are relative to its root
    rng = random.Random(7)
    folder = root / "gen"
    folder.mkdir()
    for i in range(150):
        sentences = [" ".join(rng.choices(WORDS, k=12)).capitalize() + "." for _ in range(4)]
        (folder / f"doc{i:03d}.txt").write_text(f"Document {i} about {WORDS[i % len(WORDS)]}. " + " ".join(sentences))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        report = Indexer(Database(engine), HashingEmbedder(), settings).index_paths([folder], collection="c")
    assert report.failed == []
    with engine.begin() as conn:
        # planner statistics, as autovacuum would give
        conn.execute(text("ANALYZE document_chunks, chunk_terms, lexeme_stats"))
    yield engine
    engine.dispose()


@pytest.fixture
def connection(indexed_engine: Engine) -> Iterator[Connection]:
    """A connection to the module's indexed database inside a transaction rolled back after the test."""
    conn = indexed_engine.connect()
    outer = conn.begin()
    yield conn
    outer.rollback()
    conn.close()


@pytest.fixture
def db(indexed_engine: Engine, connection: Connection) -> Database:
    """The service's Database joined to the test's transaction (its commits become savepoints)."""
    return Database(indexed_engine, bind=connection)


@pytest.fixture
def indexed(db: Database) -> HashingEmbedder:
    """The embedder the module's documents were indexed with."""
    return HashingEmbedder()


def _request(embedder, query: str, **kw) -> SearchRequest:
    parsed = parse_query(query)
    any_terms, required = websearch_parts(parsed)
    defaults = dict(
        bm25_text=bm25_text(parsed),
        collection="c",
        query_vector=embedder.embed_query(query),
        any_terms=any_terms,
        required_terms=required,
        vector_weight=0.7,
        keyword_weight=0.3,
        rrf_k=60,
        candidate_k=20,
        limit=40,
        exact_search_below=0,  # these tests are about the HNSW index (the collection is small)
    )
    defaults.update(kw)
    return SearchRequest(**defaults)  # type: ignore[arg-type]


def _explain(session: Session, request: SearchRequest) -> str:
    # On a few hundred rows an exact sort is cheapest, so the planner is told to avoid it; the 100k-chunk
    # benchmark records the plan the planner picks by itself.
    session.execute(text("SET LOCAL enable_seqscan = off"))
    session.execute(text("SET LOCAL enable_sort = off"))
    return explain(session, request)


def test_vector_arm_uses_hnsw_and_keyword_arm_uses_its_index(db, indexed):
    with db.transaction() as session:
        ts_plan = _explain(session, _request(indexed, '"document 7"', keyword_scorer="ts_rank_cd"))
        bm25_plan = _explain(session, _request(indexed, "replica zebra"))
    assert "Index Scan using ix_document_chunks_embedding_hnsw" in ts_plan
    assert "Bitmap Index Scan on ix_document_chunks_content_tsv" in ts_plan  # selective, so GIN pays off
    assert "ix_chunk_terms_impact" in bm25_plan


@pytest.mark.parametrize("scorer", ["bm25", "ts_rank_cd"])
@pytest.mark.parametrize("fusion", ["rrf", "linear"])
def test_sql_fusion_agrees_with_python(db, indexed, fusion, scorer):
    request = _request(indexed, "replica backup restore schema", fusion_method=fusion, keyword_scorer=scorer)
    with db.transaction() as session:
        hits = hybrid_search(session, request)
    assert hits and any(h.vector_rank and h.keyword_rank for h in hits), "both arms must contribute"
    vector_ranked = [h.chunk_id for h in sorted((h for h in hits if h.vector_rank), key=lambda h: h.vector_rank)]
    keyword_ranked = [h.chunk_id for h in sorted((h for h in hits if h.keyword_rank), key=lambda h: h.keyword_rank)]
    if fusion == "rrf":
        expected = rrf_fuse(vector_ranked, keyword_ranked, vector_weight=0.7, keyword_weight=0.3, rrf_k=60)
    else:
        expected = linear_fuse(
            {h.chunk_id: h.vector_score for h in hits if h.vector_rank},
            {h.chunk_id: h.keyword_score for h in hits if h.keyword_rank},
            vector_weight=0.7,
            keyword_weight=0.3,
        )
    assert [h.chunk_id for h in hits] == [c.chunk_id for c in expected]
    for hit, cand in zip(hits, expected, strict=True):
        assert hit.fused_score == pytest.approx(cand.score, abs=1e-12)


@pytest.mark.parametrize("scorer", ["bm25", "ts_rank_cd"])
def test_weight_zero_arm_is_not_run(db, indexed, scorer):
    with db.transaction() as session:
        vector_only = hybrid_search(session, _request(indexed, "replica backup", keyword_weight=0.0))
        keyword_only = hybrid_search(
            session, _request(indexed, "replica backup", vector_weight=0.0, keyword_scorer=scorer)
        )
    assert vector_only and all(h.keyword_rank is None for h in vector_only)
    assert keyword_only and all(h.vector_rank is None for h in keyword_only)


@pytest.mark.parametrize("scorer", ["bm25", "ts_rank_cd"])
def test_question_is_an_or_of_its_words_and_phrases_and_exclusions_hold(db, indexed, scorer):
    def keyword(query: str) -> list:
        return hybrid_search(session, _request(indexed, query, vector_weight=0.0, keyword_scorer=scorer))

    with db.transaction() as session:
        question = keyword("how would a replica zebra work?")
        assert question, "a question with one unknown word must still match (OR, not AND)"
        excluded = keyword("replica -backup")
        assert excluded and all("backup" not in h.content.lower() for h in excluded)
        phrase = keyword('"document 7 about"')
        assert [h.source for h in phrase] == ["gen/doc007.txt"]


@pytest.mark.parametrize(
    "query",
    ["'); DROP TABLE documents; --", "a & | ! ( ) : * '", '"unclosed phrase', "-", "!!!", "🙂 emoji", "שלום עולם"],
)
def test_hostile_queries_are_safe(db, indexed, query):
    with db.transaction() as session:
        hybrid_search(session, _request(indexed, query))
        assert session.execute(text("SELECT count(*) FROM documents")).scalar() == 150


def test_filtered_query_still_returns_k_rows_through_iterative_scan(db, indexed, connection):
    # one document of 150 keeps 1/150 of the graph: a plain HNSW scan with ef_search 10 finds ~0 of them
    wanted = connection.execute(text("SELECT count(*) FROM document_chunks WHERE collection='c'")).scalar()
    assert wanted > 100
    request = _request(
        indexed,
        "replica",
        keyword_weight=0.0,
        candidate_k=5,
        ef_search=10,
        filters=ChunkFilters(source_prefix="gen/doc01"),  # doc010..doc019
    )
    with db.transaction() as session:
        session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = _explain(session, request)
        assert "ix_document_chunks_embedding_hnsw" in plan
        hits = hybrid_search(session, request)
    assert len(hits) == 5
    assert all(h.source.startswith("gen/doc01") for h in hits)


def test_filters_are_validated():
    with pytest.raises(UnknownFilterError, match=r"unknown filter key.*'colour'.*valid keys: source"):
        ChunkFilters.parse({"colour": "red"})
    with pytest.raises(UnknownFilterError, match=r"key\(s\) 'sources'; did you mean 'source'\? valid keys"):
        ChunkFilters.parse({"sources": "a.md"})
    with pytest.raises(UnknownFilterError, match="'headers' must be"):
        ChunkFilters.parse({"headers": "h1"})
    assert ChunkFilters.parse({"headers": {"h1": "Guide"}}).headers == {"h1": "Guide"}


def test_headers_and_source_filters(db, indexed):
    with db.transaction() as session:
        hits = hybrid_search(session, _request(indexed, "replica", filters=ChunkFilters(source="gen/doc042.txt")))
        assert hits and {h.source for h in hits} == {"gen/doc042.txt"}
        none = hybrid_search(session, _request(indexed, "replica", filters=ChunkFilters(headers={"h1": "nope"})))
        assert none == []


def test_query_vector_search_is_exact_enough(db, indexed, connection):
    """HNSW top-5 against an exact scan on the same data (recall sanity)."""
    q = indexed.embed_query("replica backup restore")
    with db.transaction() as session:
        hits = hybrid_search(session, _request(indexed, "replica backup restore", keyword_weight=0.0, candidate_k=5))
    rows = connection.execute(
        select(DocumentChunk.id, DocumentChunk.embedding).where(DocumentChunk.collection == "c")
    ).all()
    ids = np.array([r[0] for r in rows])
    sims = np.stack([np.asarray(r[1]) for r in rows]) @ q
    exact = set(ids[np.argsort(-sims)[:5]].tolist())
    assert len(exact & {h.chunk_id for h in hits}) >= 4


def _keyword_only(indexed, query: str, **kw) -> SearchRequest:
    return _request(indexed, query, vector_weight=0.0, keyword_weight=1.0, bm25_k1=1.2, bm25_b=0.75, **kw)


@pytest.mark.parametrize("budget", [1, 20, 160])
def test_bounded_bm25_returns_exact_scores(db, indexed, connection, budget):
    # every word is in most of the 150 documents, so each budget here truncates every lexeme
    query = "replica backup restore schema"
    expected = stored_reference_bm25(connection, "c", query, k1=1.2, b=0.75)
    with db.transaction() as session:
        hits = hybrid_search(session, _keyword_only(indexed, query, bm25_max_postings=budget))
    # only chunks seen in some lexeme's best postings compete: the budget shared by 4 lexemes (at least 1 each)
    assert min(max(budget // 4, 1), 20) <= len(hits) <= 20
    for hit in hits:
        assert hit.keyword_score == pytest.approx(expected[hit.chunk_id], abs=1e-6)
    assert [h.keyword_score for h in hits] == sorted((h.keyword_score for h in hits), reverse=True)


def _doc_freqs(connection, query: str) -> list[int]:
    """Postings per lexeme of ``query`` in collection ``c``."""
    rows = connection.execute(
        text(
            "SELECT doc_freq FROM lexeme_stats WHERE collection = 'c' "
            "AND lexeme = ANY(tsvector_to_array(to_tsvector('english', :q)))"
        ),
        {"q": query},
    )
    return list(rows.scalars().all())


def test_bounded_bm25_with_budget_above_all_postings_is_the_exact_ranking(db, indexed, connection):
    from rag_service.db.bm25 import posting_level

    query, everything = "replica backup restore schema", {"candidate_k": 200, "limit": 200}
    doc_freqs = _doc_freqs(connection, query)
    assert len(doc_freqs) == 4 and sum(doc_freqs) <= 1000  # a budget of 1000 reads every posting
    with db.transaction() as session:
        level = session.execute(posting_level(_keyword_only(indexed, query, bm25_max_postings=240))).scalar_one()
        assert level < min(doc_freqs)  # 240 shared by the 4 lexemes truncates every list
        exact = hybrid_search(session, _keyword_only(indexed, query, **everything))
        bounded = hybrid_search(session, _keyword_only(indexed, query, bm25_max_postings=1000, **everything))
        top_only = hybrid_search(session, _keyword_only(indexed, query, bm25_max_postings=240))
        top_exact = hybrid_search(session, _keyword_only(indexed, query))

    def ranking(hits):  # equal scores may differ in the last bit (summation order): compare rounded
        return [(round(h.keyword_score, 9), h.chunk_id) for h in sorted(hits, key=lambda h: -h.keyword_score)]

    assert sorted(ranking(bounded), key=lambda r: (-r[0], r[1])) == sorted(ranking(exact), key=lambda r: (-r[0], r[1]))
    # a real truncation still finds most of the exact top 20
    assert len({h.chunk_id for h in top_only} & {h.chunk_id for h in top_exact}) >= 14


def test_bounded_bm25_reads_the_best_postings_through_the_impact_index(db, indexed):
    with db.transaction() as session:
        plan = _explain(session, _keyword_only(indexed, "replica backup", bm25_max_postings=10))
    assert "ix_chunk_terms_impact" in plan
    assert "pk_chunk_terms" in plan  # the chosen chunks' full scores come from (chunk_id, lexeme)


def water_level(doc_freqs: list[int], budget: int) -> int:
    """Reference: the largest per-lexeme read L with sum(min(df, L)) <= budget (at least 1; all: max df)."""
    if sum(doc_freqs) <= budget:
        return max(budget, 1)
    level = 1
    while sum(min(df, level + 1) for df in doc_freqs) <= budget:
        level += 1
    return level


@pytest.mark.parametrize("budget", [1, 3, 10, 25, 60, 100, 400, 10_000])
def test_the_posting_budget_is_shared_rare_lexemes_first(db, indexed, connection, budget):
    from rag_service.db.bm25 import posting_level

    # lexemes of very different document frequencies: rare ones are read whole, frequent ones share the rest
    rows = connection.execute(
        text(
            "SELECT lexeme, doc_freq FROM lexeme_stats WHERE collection = 'c' AND lexeme ~ '^[a-z]+$' "
            "ORDER BY doc_freq, lexeme"
        )
    ).all()
    query = " ".join(rows[i][0] for i in (0, len(rows) // 3, 2 * len(rows) // 3, -2, -1))
    doc_freqs = _doc_freqs(connection, query)
    assert len(set(doc_freqs)) >= 3
    request = _keyword_only(indexed, query, bm25_max_postings=budget)
    with db.transaction() as session:
        level = session.execute(posting_level(request)).scalar_one()
    assert level == water_level(doc_freqs, budget)
    assert sum(min(df, level) for df in doc_freqs) <= max(budget, len(doc_freqs))


def test_bounded_bm25_with_filters_takes_the_exact_path(db, indexed):
    query, filters = "replica backup restore", ChunkFilters(source_prefix="gen/doc1")
    with db.transaction() as session:
        exact = hybrid_search(session, _keyword_only(indexed, query, filters=filters))
        bounded = hybrid_search(session, _keyword_only(indexed, query, filters=filters, bm25_max_postings=1))
    assert exact and [h.chunk_id for h in bounded] == [h.chunk_id for h in exact]
    assert all(h.source.startswith("gen/doc1") for h in exact)


@pytest.mark.parametrize("scorer", ["bm25", "ts_rank_cd"])
def test_a_reused_statement_binds_each_call_values(db, indexed, scorer):
    from rag_service.db.search import build_search
    from rag_service.db.vector_type import vector_from_send

    requests = [
        _request(indexed, "replica backup", keyword_scorer=scorer, candidate_k=10, limit=15),
        _request(indexed, "schema migration table", keyword_scorer=scorer, candidate_k=7, limit=9, rrf_k=5),
        _request(indexed, "vector fusion", keyword_scorer=scorer, vector_weight=0.2, keyword_weight=0.9),
    ]
    with db.transaction() as session:
        for request in requests:
            cached = hybrid_search(session, request)  # the statement of the first request, rebound
            fresh = session.execute(build_search(request)).all()
            assert [h.chunk_id for h in cached] == [row.id for row in fresh]
            assert [h.fused_score for h in cached] == pytest.approx([row.fused_score for row in fresh])
            stored = session.execute(
                select(DocumentChunk.embedding, DocumentChunk.id).where(DocumentChunk.id == cached[0].chunk_id)
            ).one()
            assert np.array_equal(cached[0].embedding, np.asarray(stored.embedding, dtype=np.float32))
    assert vector_from_send(bytes.fromhex("0002 0000 3f800000 c0000000")).tolist() == [1.0, -2.0]


def test_searches_are_always_planned_for_their_own_values(db, indexed, connection):
    # psycopg prepares a statement run five times; a generic plan, blind to the query's lexemes,
    # was 7x slower on SciFact. Every execution must get a custom plan.
    with db.transaction() as session:
        for query in ["replica backup", "schema migration", "vector fusion", "table column", "rank score"] * 3:
            hybrid_search(session, _request(indexed, query, bm25_max_postings=30))
    plans = connection.execute(
        text(
            "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
            "WHERE statement LIKE '%bm25_terms%'"
        )
    ).one()
    assert plans[1] is not None and plans[1] >= 10, "the search statement should have been prepared"
    assert plans[0] == 0
