"""BM25 in SQL: statistics stay exactly right through every write path, scores equal a reference."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from rag_service.db import bm25, search
from rag_service.db.search import SearchRequest, hybrid_search
from rag_service.db.search_request import ChunkFilters
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from rag_service.retrieve.query import bm25_text, excluded_terms, parse_query, websearch_parts

TEXTS = {
    "a.txt": "Replication streams the write-ahead log to a replica. The replica replays the log continuously.",
    "b.txt": "Backups are taken nightly; a backup is restored with pg_restore into a fresh database cluster.",
    "c.txt": "The replica can be promoted during failover. Failover promotes the replica to primary quickly.",
    "d.txt": "Vector search uses HNSW graphs; keyword search uses a GIN index over tsvector lexemes of chunks.",
    "e.txt": "Log shipping and replication: the primary ships log segments, replicas replay, backups archive logs.",
}


def assert_stats_consistent(connection) -> None:  # type: ignore[no-untyped-def]
    """The trigger-maintained statistics equal a recount from the stored tsvectors."""
    postings = connection.execute(
        text(
            "SELECT c.id, c.collection, u.lexeme, greatest(coalesce(cardinality(u.positions),0),1), c.lexeme_count "
            "FROM document_chunks c, unnest(c.content_tsv) u ORDER BY 1, 3"
        )
    ).all()
    stored = connection.execute(
        text("SELECT chunk_id, collection, lexeme, tf, doc_len FROM chunk_terms ORDER BY 1, 3")
    ).all()
    assert stored == postings
    df = connection.execute(
        text(
            "SELECT c.collection, u.lexeme, count(*) FROM document_chunks c, unnest(c.content_tsv) u "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        )
    ).all()
    assert connection.execute(text("SELECT collection, lexeme, doc_freq FROM lexeme_stats ORDER BY 1, 2")).all() == df
    sizes = connection.execute(
        text("SELECT collection, count(*), sum(lexeme_count) FROM document_chunks GROUP BY 1 ORDER BY 1")
    ).all()
    assert (
        connection.execute(text("SELECT collection, chunk_count, total_length FROM collection_stats ORDER BY 1")).all()
        == sizes
    )
    assert_contexts_consistent(connection)


def assert_contexts_consistent(connection, *, every_chunk: bool = True) -> None:  # type: ignore[no-untyped-def]
    """Every context is stored (``every_chunk``: none is over ``MAX_CONTEXT_CHARS``), its length is its
    postings' total, and the trigger-kept context statistics equal a recount (from migration 0013 on)."""
    if connection.execute(text("SELECT to_regclass('document_contexts')")).scalar() is None:
        return  # a revision before 0013
    if every_chunk:
        keys = (  # sections, and whole documents where no chunk has a section
            "SELECT DISTINCT collection, document_id, coalesce(parent_start, -1) FROM document_chunks c "
            "WHERE parent_start IS NOT NULL OR NOT EXISTS (SELECT 1 FROM document_chunks s WHERE "
            "s.collection = c.collection AND s.document_id = c.document_id AND s.parent_start IS NOT NULL) "
            "ORDER BY 1, 2, 3"
        )
        stored = "SELECT collection, document_id, context_start FROM document_contexts ORDER BY 1, 2, 3"
        assert connection.execute(text(stored)).all() == connection.execute(text(keys)).all()
    lengths = "SELECT collection, document_id, context_start, length FROM document_contexts ORDER BY 1, 2, 3"
    totals = (
        "SELECT collection, document_id, context_start, sum(tf) FROM context_terms GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
    assert connection.execute(text(lengths)).all() == connection.execute(text(totals)).all()
    recount = "SELECT collection, count(*), sum(length) FROM document_contexts GROUP BY 1 ORDER BY 1"
    kept = "SELECT collection, context_count, context_length FROM context_stats ORDER BY 1"
    assert connection.execute(text(kept)).all() == connection.execute(text(recount)).all()


def checkout_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, texts: dict[str, str]) -> Path:
    """``kb/`` holding ``texts`` (name -> body) in a checkout at ``tmp_path``, the working directory, so that
    sources are stored relative to its root."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    root = tmp_path / "kb"
    root.mkdir()
    for name, body in texts.items():
        (root / name).write_text(body)
    return root


@pytest.fixture
def folder(tmp_path, monkeypatch):
    return checkout_folder(tmp_path, monkeypatch, TEXTS)


def test_statistics_follow_every_write_path(db, settings, folder, connection):
    indexer = Indexer(db, HashingEmbedder(), settings)
    indexer.index_paths([folder], collection="one")
    indexer.index_paths([folder / "a.txt", folder / "b.txt"], collection="two")
    assert_stats_consistent(connection)

    (folder / "a.txt").write_text(TEXTS["a.txt"] + " Logical replication copies rows, not pages.")
    indexer.index_paths([folder], collection="one")  # update
    assert_stats_consistent(connection)

    (folder / "b.txt").unlink()
    indexer.index_paths([folder], collection="one", prune=True)  # prune
    assert_stats_consistent(connection)

    indexer.reindex_all()  # re-chunk everything
    assert_stats_consistent(connection)

    connection.execute(text("DELETE FROM documents WHERE collection = 'two'"))  # cascade outside ingestion
    assert_stats_consistent(connection)
    assert connection.execute(text("SELECT count(*) FROM collection_stats WHERE collection='two'")).scalar() == 0


def test_a_failed_write_leaves_statistics_untouched(db, settings, folder, connection):
    indexer = Indexer(db, HashingEmbedder(), settings)
    indexer.index_paths([folder], collection="one")
    before = connection.execute(text("SELECT * FROM lexeme_stats ORDER BY 1, 2")).all()
    with pytest.raises(Exception, match="violates check constraint"), db.transaction() as session:
        session.execute(text("DELETE FROM document_chunks WHERE collection = 'one'"))
        session.execute(text("INSERT INTO index_settings VALUES (2, 'x', 1, 'english')"))  # fails: id must be 1
    assert connection.execute(text("SELECT * FROM lexeme_stats ORDER BY 1, 2")).all() == before
    assert_stats_consistent(connection)


def reference_bm25(docs: dict[int, Counter[str]], query: list[str], *, k1: float, b: float) -> dict[int, float]:
    """Okapi BM25 with Lucene's idf, over the given term counts."""
    n = len(docs)
    avglen = sum(sum(c.values()) for c in docs.values()) / n
    df = Counter(term for counts in docs.values() for term in counts)
    scores: dict[int, float] = {}
    for doc_id, counts in docs.items():
        length = sum(counts.values())
        score = 0.0
        for term in set(query):
            tf = counts.get(term, 0)
            if tf:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avglen))
        if score:
            scores[doc_id] = score
    return scores


def stored_reference_bm25(connection, collection: str, query: str, *, k1: float, b: float) -> dict[int, float]:  # type: ignore[no-untyped-def]
    """``reference_bm25`` over the lexemes and positions of the stored tsvectors of ``collection``."""
    rows = connection.execute(
        text(
            "SELECT c.id, u.lexeme, greatest(coalesce(cardinality(u.positions),0),1) "
            "FROM document_chunks c, unnest(c.content_tsv) u WHERE c.collection = :collection"
        ),
        {"collection": collection},
    ).all()
    docs: dict[int, Counter[str]] = {}
    for chunk_id, lexeme, tf in rows:
        docs.setdefault(chunk_id, Counter())[lexeme] += tf
    lexemes = connection.execute(text("SELECT tsvector_to_array(to_tsvector('english', :q))"), {"q": query}).scalar()
    return reference_bm25(docs, lexemes, k1=k1, b=b)


def keyword_request(query: str, **fields: Any) -> SearchRequest:
    """A keyword-only request of collection ``one`` for ``query`` (parsed as ``retrieve`` parses it), its 100
    best chunks; ``fields`` set the rest or replace these."""
    parsed = parse_query(query)
    any_terms, required = websearch_parts(parsed)
    defaults: dict[str, Any] = {
        "collection": "one",
        "query_vector": None,
        "any_terms": any_terms,
        "required_terms": required,
        "vector_weight": 0.0,
        "keyword_weight": 1.0,
        "candidate_k": 100,
        "limit": 100,
        "bm25_text": bm25_text(parsed),
        "excluded_terms": excluded_terms(parsed),
    }
    return SearchRequest(**{**defaults, **fields})


@pytest.mark.parametrize("max_postings", [0, 12000])  # exact path; bounded path with every list within budget
@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.2, 0.75), (2.0, 0.0)])
@pytest.mark.parametrize("query", ["replica log replay", "backups restored nightly", "how does failover work?"])
def test_scores_equal_reference_bm25(db, settings, folder, connection, query, k1, b, max_postings):
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    request = keyword_request(query, bm25_k1=k1, bm25_b=b, bm25_max_postings=max_postings)
    expected = stored_reference_bm25(connection, "one", request.bm25_text, k1=k1, b=b)
    with db.transaction() as session:
        hits = hybrid_search(session, request)
    got = {h.chunk_id: h.keyword_score for h in hits}
    assert set(got) == set(expected)
    for chunk_id, score in expected.items():
        assert got[chunk_id] == pytest.approx(score, abs=1e-6)
    assert [h.chunk_id for h in hits] == sorted(expected, key=lambda i: (-expected[i], i))


@pytest.mark.parametrize("probe_cost", [0, 10**9])  # every passing chunk probed / every posting read
@pytest.mark.parametrize(
    ("query", "filters"),
    [
        ("replica log replay", {"source_prefix": "kb/"}),  # every chunk passes
        ("replica log replay", {"source": "kb/e.txt"}),
        ('"replica" log', None),  # a required term: only chunks holding it
        ('"backups" restored', {"source_prefix": "kb/b"}),
    ],
)
def test_filtered_scores_equal_reference_bm25_from_either_side(
    db, settings, folder, connection, monkeypatch, query, filters, probe_cost
):
    """The filtered arm scores the passing chunks exactly whether it probes them or reads the postings."""
    monkeypatch.setattr(bm25, "PROBE_COST_IN_POSTINGS", probe_cost)
    monkeypatch.setattr(search, "STATEMENTS", search.StatementCache())  # built with this cost
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    request = keyword_request(query, bm25_k1=1.2, bm25_b=0.75, filters=ChunkFilters.parse(filters))
    required = request.required_terms
    holds = "AND c.content_tsv @@ websearch_to_tsquery('english', :required)" if required else ""
    passing = set(
        connection.execute(
            text(
                "SELECT c.id FROM document_chunks c JOIN documents d ON d.collection = c.collection "
                f"AND d.id = c.document_id WHERE c.collection = 'one' AND d.source LIKE :prefix {holds}"
            ),
            {"prefix": next(iter((filters or {"source_prefix": ""}).values())) + "%", "required": required},
        ).scalars()
    )
    expected = {
        chunk: score
        for chunk, score in stored_reference_bm25(connection, "one", request.bm25_text, k1=1.2, b=0.75).items()
        if chunk in passing
    }
    assert expected, "the case keeps some chunks"
    with db.transaction() as session:
        hits = hybrid_search(session, request)
    assert [h.chunk_id for h in hits] == sorted(expected, key=lambda i: (-expected[i], i))
    for hit in hits:
        assert hit.keyword_score == pytest.approx(expected[hit.chunk_id], abs=1e-6)


@pytest.mark.parametrize("max_postings", [0, 12000])  # exact path; bounded path with every list within budget
@pytest.mark.parametrize(
    ("query", "filters"),
    [
        ("replica log replay -backups", None),  # exclusions alone: dropped through the GIN index
        ('replica log -"write ahead" -failover', None),
        ("replica log replay -backups", {"source_prefix": "kb/"}),  # with a filter: every passing chunk scored
        ('replica "log" -backups', None),  # with a phrase: the same
    ],
)
def test_excluded_terms_drop_their_chunks_and_keep_exact_scores(
    db, settings, folder, connection, query, filters, max_postings
):
    Indexer(db, HashingEmbedder(), settings).index_paths([folder], collection="one")
    request = keyword_request(
        query, bm25_k1=1.2, bm25_b=0.75, bm25_max_postings=max_postings, filters=ChunkFilters.parse(filters)
    )
    sql = str(bm25.bm25_matches(request).compile())
    # exclusions alone: found by a positive match on the GIN index, no chunk "passes"; else the filtered path
    alone = filters is None and '"log"' not in query
    assert ("bm25_excluded" in sql, "bm25_passing" in sql) == (alone, not alone)
    holding = set(
        connection.execute(
            text(
                "SELECT id FROM document_chunks WHERE collection = 'one' "
                "AND NOT content_tsv @@ websearch_to_tsquery('english', :required)"
            ),
            {"required": request.required_terms},
        ).scalars()
    )
    reference = stored_reference_bm25(connection, "one", request.bm25_text, k1=1.2, b=0.75)
    expected = {chunk: score for chunk, score in reference.items() if chunk not in holding}
    assert expected and reference.keys() - expected.keys(), "the case keeps some chunks and drops some"
    with db.transaction() as session:
        hits = hybrid_search(session, request)
    assert [h.chunk_id for h in hits] == sorted(expected, key=lambda i: (-expected[i], i))
    for hit in hits:
        assert hit.keyword_score == pytest.approx(expected[hit.chunk_id], abs=1e-6)
