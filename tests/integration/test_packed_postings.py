"""Packed postings (``db.packed_postings``, ``ext/rag_bm25``): the extension's BM25 equals the SQL arm's exact
BM25 right after a build, and stays equal through deletes, rewrites and additions until the next one."""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import re

import numpy as np
import pytest
from sqlalchemy import text

from rag_service.db import packed_postings
from rag_service.db.database import Database
from rag_service.db.presets import read_call_preset
from rag_service.db.search import explain, hybrid_search
from rag_service.db.status import read_status
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from rag_service.service_documents import delete_document
from tests.integration.test_bm25 import keyword_request, stored_reference_bm25
from tests.integration.test_bulk_index import _fresh

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
QUERIES = ["replica log replay", "backup restore cluster", "vector index graph search", "failover promote primary"]
WORDS = [
    "replica",
    "log",
    "replay",
    "backup",
    "restore",
    "cluster",
    "vector",
    "index",
    "graph",
    "search",
    "failover",
    "promote",
    "primary",
    "shard",
    "query",
    "plan",
    "table",
    "row",
    "page",
    "lock",
    "commit",
    "snapshot",
    "vacuum",
    "analyze",
    "statistics",
    "memory",
    "cache",
]


def corpus(seed: int, count: int) -> dict[str, str]:
    """``count`` documents of Zipf-like words (frequent words in most chunks, rare ones in few)."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    return {f"doc-{seed}-{i}": " ".join(rng.choices(WORDS, weights, k=rng.randint(8, 40))) + "." for i in range(count)}


@pytest.fixture
def packing_settings(settings, server_has_extension):
    return dataclasses.replace(settings, bm25_packed_min_chunks=1)


@pytest.fixture
def server_has_extension(connection):
    found = connection.execute(text("SELECT count(*) FROM pg_available_extensions WHERE name = 'rag_bm25'")).scalar()
    if not found:
        message = "the server has no rag_bm25 extension (make install builds it)"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def vector() -> np.ndarray:
    return HashingEmbedder().embed_query("replica log replay")


def index(db, settings, texts: dict[str, str]) -> None:
    Indexer(db, HashingEmbedder(), settings).index_texts(
        [(source, source, body) for source, body in texts.items()], collection="one"
    )


def assert_exact(db, connection) -> None:
    """For every query, the packed arm returns the exact BM25 top 100 (ids in order, scores to float32)."""
    for query in QUERIES:
        expected = stored_reference_bm25(connection, "one", query, k1=1.2, b=0.75)
        with db.transaction() as session:
            hits = hybrid_search(session, keyword_request(query, packed_postings=True))
        got = [h.chunk_id for h in hits]
        want = sorted(expected, key=lambda i: (-expected[i], i))[: len(got)]
        assert len(got) == min(100, len(expected))
        scores = {h.chunk_id: h.keyword_score for h in hits}
        # float32 sums may swap two chunks whose scores differ by less than their rounding: compare by score
        assert [expected[i] for i in got] == pytest.approx([expected[i] for i in want], rel=1e-5)
        for chunk_id in got:
            assert scores[chunk_id] == pytest.approx(expected[chunk_id], rel=1e-5)


def test_packed_arm_is_exact_through_deletes_rewrites_and_additions(db, packing_settings, connection, monkeypatch):
    texts = corpus(1, 300)
    index(db, packing_settings, texts)
    snapshot = connection.execute(text("SELECT ready, chunk_count FROM bm25_packed_snapshots")).one()
    assert snapshot.ready and snapshot.chunk_count == 300
    assert_exact(db, connection)

    monkeypatch.setattr(packed_postings, "REBUILD_SHARE", 1.0)  # keep the snapshot: tombstones and additions
    connection.execute(text("DELETE FROM documents WHERE collection = 'one' AND source IN ('doc-1-0', 'doc-1-7')"))
    index(db, packing_settings, {f"doc-1-{i}": body for i, body in enumerate(corpus(2, 5).values(), 10)})
    index(db, packing_settings, corpus(3, 20))
    rewrite = (
        "UPDATE document_chunks SET content_tsv = to_tsvector('english', :body) "
        "WHERE id = (SELECT min(id) + :n FROM document_chunks)"
    )
    for n, body in enumerate(["replica replica replay backup", "failover failover promote graph graph graph"], 30):
        connection.execute(text(rewrite), {"body": body, "n": n})  # rewritten in place, outside ingestion
    tombstones = connection.execute(text("SELECT count(*) FROM bm25_packed_tombstones")).scalar()
    assert tombstones >= 7
    assert_exact(db, connection)

    monkeypatch.setattr(packed_postings, "REBUILD_SHARE", 0.0)
    index(db, packing_settings, corpus(4, 1))  # a run past the share packs again
    assert connection.execute(text("SELECT count(*) FROM bm25_packed_tombstones")).scalar() == 0
    assert_exact(db, connection)


def test_queries_see_the_snapshot_and_a_shrunk_collection_loses_it(db, packing_settings, connection):
    index(db, packing_settings, corpus(5, 40))
    with db.transaction() as session:
        assert read_call_preset(session, "workflow", collection="one").packed_postings
    exact = dataclasses.replace(
        keyword_request("replica log replay", bm25_max_postings=0), vector_weight=0.5, query_vector=vector()
    )
    packed = dataclasses.replace(exact, packed_postings=True)
    with db.transaction() as session:
        fused = [(h.chunk_id, round(h.fused_score, 5)) for h in hybrid_search(session, exact)]
        assert [(h.chunk_id, round(h.fused_score, 5)) for h in hybrid_search(session, packed)] == fused

    connection.execute(text("DELETE FROM documents WHERE collection = 'one'"))
    index(db, dataclasses.replace(packing_settings, bm25_packed_min_chunks=10), corpus(6, 3))
    assert connection.execute(text("SELECT count(*) FROM bm25_packed_snapshots")).scalar() == 0
    assert connection.execute(text("SELECT count(*) FROM bm25_packed_lists")).scalar() == 0
    with db.transaction() as session:
        assert not read_call_preset(session, "workflow", collection="one").packed_postings


def test_without_the_extension_the_bounded_arm_stays_and_says_why(db, settings, connection, monkeypatch, caplog):
    monkeypatch.setattr(packed_postings, "EXTENSION", "rag_bm25_absent")
    index(db, dataclasses.replace(settings, bm25_packed_min_chunks=1), corpus(7, 10))
    assert connection.execute(text("SELECT count(*) FROM bm25_packed_snapshots")).scalar() == 0
    done = packed_postings.refresh(db, "one", min_chunks=1)
    assert done.action == "unavailable"
    assert "no rag_bm25_absent extension" in done.reason and "make install" in done.reason
    assert "keeps the bounded BM25 arm" in caplog.text


def test_a_corrupt_list_is_named(db, packing_settings, connection):
    index(db, packing_settings, corpus(8, 10))
    connection.execute(text("UPDATE bm25_packed_lists SET data = '\\x80'::bytea WHERE lexeme = 'replica'"))
    corrupt = pytest.raises(Exception, match="rag_bm25_topk: a posting list is truncated or corrupt")
    with corrupt, db.transaction() as session:
        hybrid_search(session, keyword_request("replica", packed_postings=True))


def test_status_names_the_packed_collections_of_a_committed_build(fresh_database, packing_settings):
    """Outside a test's transaction: the build's own REPEATABLE READ transaction, and ``rag db status``."""
    index(fresh_database, packing_settings, corpus(9, 30))
    status = read_status(fresh_database.engine)
    assert status.packed == frozenset({"one"})
    assert re.match(r"^\d+\.\d+$", status.rag_bm25 or ""), status.rag_bm25
    assert "collection: one: 30 documents, 30 chunks, postings packed (exact BM25)" in status.lines()
    # a first pack vacuums the postings first (fresh postings made the pack's scan 2-10x slower)
    with fresh_database.engine.connect() as conn:
        vacuumed = conn.execute(text("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'chunk_terms'"))
        assert vacuumed.scalar_one() >= 1
    with fresh_database.transaction() as session:
        hits = hybrid_search(session, keyword_request("replica log replay", packed_postings=True))
    assert hits and all(h.keyword_score > 0 for h in hits)


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitioned"])
def test_deletes_alone_pack_again_past_the_share(database_factory, packing_settings, tmp_path, partitioned):
    """Committed (an edit's shared lock ends with its transaction, then the repack takes the reindex lock); on a
    schema partitioned by collection too, whose rebuilt chunk tables once lost the tombstone triggers."""
    engine = _fresh(database_factory, packing_settings, partitioned=partitioned)
    db = Database(engine)
    try:
        index(db, packing_settings, corpus(10, 20))
        remove = functools.partial(delete_document, db, collection="one", uploads_root=tmp_path, packed_min_chunks=1)

        def count(sql: str) -> int:
            with db.engine.connect() as conn:
                return int(conn.execute(text(sql)).scalar_one())

        assert remove(source="doc-10-0") == 1  # 1 of 20: within 5%, a tombstone
        assert count("SELECT chunk_count FROM bm25_packed_snapshots") == 20
        assert count("SELECT count(*) FROM bm25_packed_tombstones") == 1
        with db.engine.connect() as conn:
            assert_exact(db, conn)
        assert remove(source="doc-10-1") == 1  # 2 of 20: past 5%, packed again
        assert count("SELECT chunk_count FROM bm25_packed_snapshots") == 18
        assert count("SELECT count(*) FROM bm25_packed_tombstones") == 0
        with db.engine.connect() as conn:
            assert_exact(db, conn)
    finally:
        engine.dispose()


def test_the_lists_are_probed_by_lexeme_when_the_statistics_predate_the_pack(fresh_database, packing_settings):
    """A collection packed after the lists' last ANALYZE is one row to the planner; its arm must still read the
    query's lists alone, by key (with a join it read every list of the collection: 15 of a 15 ms arm)."""
    db = fresh_database
    with db.transaction() as session:
        session.execute(text("ALTER TABLE bm25_packed_lists SET (autovacuum_enabled = false)"))
    rng = random.Random(35)
    vocabulary = [f"term{i}" for i in range(600)]
    for collection in ("known", "one"):  # "one" is packed after the ANALYZE that learns "known"
        texts = [(f"{collection}-{i}", "", " ".join(rng.choices(vocabulary, k=30))) for i in range(80)]
        Indexer(db, HashingEmbedder(), packing_settings).index_texts(texts, collection=collection)
        if collection == "known":
            with db.transaction() as session:
                session.execute(text("ANALYZE bm25_packed_lists"))
    with db.transaction() as session:
        lists = session.scalar(text("SELECT count(*) FROM bm25_packed_lists WHERE collection = 'one'"))
        assert lists is not None and lists > 500
        plan = explain(session, keyword_request("term1 term2 term3", packed_postings=True), analyze=True)
    reads = [
        int(float(m.group(1))) * int(m.group(2))
        for line in plan.splitlines()
        if " on bm25_packed_lists" in line and (m := re.search(r"actual time=\S+ rows=([\d.]+) loops=(\d+)", line))
    ]
    assert reads and sum(reads) <= 3, plan
