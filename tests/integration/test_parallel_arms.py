"""The arms run at once (``db.parallel_search``): the same hits as the one statement, field for field, in the
session's snapshot even when another transaction commits between the two; the one statement whenever the
second connection is busy or the session cannot share its snapshot."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from rag_service.db import parallel_search
from rag_service.db.arm_connections import arm_connection_of
from rag_service.db.parallel_search import fused_search, has_idle_core
from rag_service.db.presets import read_call_preset
from rag_service.db.search import SearchHit, SearchRequest, hybrid_search
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.integration.test_packed_postings import QUERIES, corpus
from tests.integration.test_search import _request as search_request

EMBEDDER = HashingEmbedder()


def request_for(query: str, **fields) -> SearchRequest:  # type: ignore[no-untyped-def]
    """A hybrid request of collection ``one`` with every signal, its arms at once (through the HNSW index)."""
    signals = {"context_bm25": True, "proximity": True, "context_vector": True, "parallel_arms": True}
    return search_request(
        EMBEDDER,
        query,
        collection="one",
        vector_weight=0.6,
        keyword_weight=0.4,
        fusion_method="linear",
        candidate_k=15,
        limit=15,
        **{**signals, **fields},
    )


def fields_of(hits: list[SearchHit]) -> list[tuple]:  # type: ignore[type-arg]
    return [
        tuple(
            np.asarray(value).tobytes() if isinstance(value, np.ndarray) else value for value in dataclasses.astuple(h)
        )
        for h in hits
    ]


@pytest.fixture(autouse=True)
def idle_core(monkeypatch) -> None:
    """The test server shares this host, whose load the suite's own workers raise: taken as having a core idle
    (``has_idle_core`` is tested on its own below)."""
    monkeypatch.setattr(parallel_search, "has_idle_core", lambda engine: True)


@pytest.fixture
def keyword_arms(monkeypatch) -> list[str]:
    """Each keyword arm run on the second connection (its SQL)."""
    ran: list[str] = []
    run = parallel_search._run_keyword_arm

    def counted(connection, snapshot, sql, parameters):  # type: ignore[no-untyped-def]
        ran.append(sql)
        return run(connection, snapshot, sql, parameters)

    monkeypatch.setattr(parallel_search, "_run_keyword_arm", counted)
    return ran


def index(db, settings, texts: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    Indexer(db, EMBEDDER, settings).index_texts([(s, s, body) for s, body in texts.items()], collection="one")


@pytest.mark.parametrize("packed", [False, True])
def test_parallel_arms_return_the_one_statements_hits(fresh_database, settings, keyword_arms, packed):
    index(fresh_database, dataclasses.replace(settings, bm25_packed_min_chunks=1 if packed else 10**9), corpus(1, 60))
    assert fresh_database.read(lambda s: read_call_preset(s, "workflow", collection="one").packed_postings) is packed
    for query in QUERIES:
        request = request_for(query, packed_postings=packed)
        parallel = fresh_database.read(lambda s, r=request: fused_search(s, r))  # type: ignore[misc]
        one = fresh_database.read(lambda s, r=request: hybrid_search(s, r))  # type: ignore[misc]
        assert parallel and fields_of(parallel) == fields_of(one)
        assert {h.context_score is not None for h in parallel} == {True}
    assert len(keyword_arms) == len(QUERIES), "every search ran its keyword arm on the second connection"


def test_the_keyword_arm_reads_the_sessions_snapshot(fresh_database, settings, keyword_arms):
    """A document committed while a read is open changes neither arm of that read (the second connection imports
    the session's snapshot; without it the keyword arm saw the new chunks and re-ranked the old ones)."""
    index(fresh_database, settings, corpus(2, 40))
    request = request_for("replica log replay")

    def work(session):  # type: ignore[no-untyped-def]
        before = hybrid_search(session, request)  # the snapshot is taken here
        index(fresh_database, settings, {"late": "replica replica log replay replay. " * 3})  # committed meanwhile
        return before, fused_search(session, request), hybrid_search(session, request)

    before, parallel, one = fresh_database.read(work)
    assert keyword_arms, "the arms ran at once"
    assert fields_of(parallel) == fields_of(before) == fields_of(one)
    after = fresh_database.read(lambda s: hybrid_search(s, request))
    assert "late" in {h.source for h in after}, "a new read sees the late document"


def test_a_busy_second_connection_runs_the_one_statement(fresh_database, settings, keyword_arms):
    index(fresh_database, settings, corpus(3, 30))
    request = request_for("backup restore cluster")
    expected = fresh_database.read(lambda s: hybrid_search(s, request))
    lock = arm_connection_of(fresh_database.engine).lock
    assert lock.acquire(blocking=False)
    try:  # another search holds it: this one does not wait
        found = fresh_database.read(lambda s: fused_search(s, request))
    finally:
        lock.release()
    assert fields_of(found) == fields_of(expected) and keyword_arms == []
    assert fields_of(fresh_database.read(lambda s: fused_search(s, request))) == fields_of(expected)
    assert len(keyword_arms) == 1


def test_a_session_with_writes_of_its_own_runs_the_one_statement(fresh_database, settings, keyword_arms):
    """Its uncommitted rows are in no snapshot another connection can import."""
    index(fresh_database, settings, corpus(4, 30))
    request = request_for("vector index graph search")
    with fresh_database.transaction() as session:
        session.execute(text("CREATE TEMP TABLE scratch (x integer) ON COMMIT DROP"))  # a write: an xid
        found = fused_search(session, request)
        assert fields_of(found) == fields_of(hybrid_search(session, request))
    assert keyword_arms == []


def test_searches_at_once_share_one_second_connection(fresh_database, settings, keyword_arms):
    """Concurrent searches never wait for the second connection (one per engine): each gets the same hits."""
    index(fresh_database, settings, corpus(5, 40))
    requests = [request_for(q) for q in QUERIES]
    expected = [fields_of(fresh_database.read(lambda s, r=r: hybrid_search(s, r))) for r in requests]  # type: ignore[misc]
    found: dict[int, list[tuple]] = {}  # type: ignore[type-arg]

    def worker(i: int) -> None:
        for _ in range(5):
            found[i] = fields_of(fresh_database.read(lambda s: fused_search(s, requests[i])))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [found[i] for i in range(len(requests))] == expected
    assert 0 < len(keyword_arms) <= 5 * len(requests)
    assert arm_connection_of(fresh_database.engine).connection is not None  # the one second connection


@pytest.mark.parametrize("parallel_from", [0, 10**9, 1])
def test_retrieve_runs_the_arms_at_once_from_the_configured_size(fresh_database, settings, keyword_arms, parallel_from):
    """``RAG_PARALLEL_ARMS_FROM``: 0 never, otherwise from that many chunks; the results do not change."""
    index(fresh_database, settings, corpus(6, 40))
    service = UniversalRAGService(
        dataclasses.replace(settings, parallel_arms_from=parallel_from), database=fresh_database, embedder=EMBEDDER
    )
    result = service.retrieve("replica log replay", "workflow", collection="one", rerank_enabled=False)
    baseline = UniversalRAGService(
        dataclasses.replace(settings, parallel_arms_from=0), database=fresh_database, embedder=EMBEDDER
    ).retrieve("replica log replay", "workflow", collection="one", rerank_enabled=False)
    assert [(c.chunk_id, c.relevance_score) for c in result.chunks] == [
        (c.chunk_id, c.relevance_score) for c in baseline.chunks
    ]
    assert result.chunks and len(keyword_arms) == (1 if parallel_from == 1 else 0)


def test_a_failing_vector_arm_leaves_the_second_connection_ready(fresh_database, settings, monkeypatch):
    """The search that fails waits for its keyword arm, so the next search finds the connection idle."""
    index(fresh_database, settings, corpus(7, 30))
    request = request_for("failover promote primary")
    expected = fields_of(fresh_database.read(lambda s: hybrid_search(s, request)))
    run, configure = parallel_search._run_keyword_arm, parallel_search.configure_vector_scan
    finished: list[str] = []

    def slow(connection, snapshot, sql, parameters):  # type: ignore[no-untyped-def]
        time.sleep(0.3)
        found = run(connection, snapshot, sql, parameters)
        finished.append(sql)
        return found

    def failing(session, *, ef_search):  # type: ignore[no-untyped-def]
        raise RuntimeError("the vector arm failed")

    monkeypatch.setattr(parallel_search, "_run_keyword_arm", slow)
    monkeypatch.setattr(parallel_search, "configure_vector_scan", failing)
    with pytest.raises(RuntimeError, match="vector arm failed"):
        fresh_database.read(lambda s: fused_search(s, request))
    assert len(finished) == 1, "the failed search waited for its keyword arm"
    connection = arm_connection_of(fresh_database.engine).connection
    assert connection is not None and connection.info.transaction_status.name == "IDLE"
    monkeypatch.setattr(parallel_search, "configure_vector_scan", configure)
    assert fields_of(fresh_database.read(lambda s: fused_search(s, request))) == expected
    assert len(finished) == 2


def test_a_dead_second_connection_is_replaced(fresh_database, settings, keyword_arms):
    """Its server process gone (a restart, an idle timeout): that search runs the one statement, the next opens
    a new second connection."""
    index(fresh_database, settings, corpus(8, 30))
    request = request_for("snapshot vacuum analyze")
    expected = fields_of(fresh_database.read(lambda s: hybrid_search(s, request)))
    assert fields_of(fresh_database.read(lambda s: fused_search(s, request))) == expected
    holder = arm_connection_of(fresh_database.engine)
    assert holder.connection is not None
    dead = holder.connection
    with fresh_database.engine.connect() as other:
        other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": dead.info.backend_pid})
    assert fields_of(fresh_database.read(lambda s: fused_search(s, request))) == expected
    assert holder.connection is None and dead.closed
    assert fields_of(fresh_database.read(lambda s: fused_search(s, request))) == expected
    assert holder.connection is not None and holder.connection is not dead
    assert len(keyword_arms) == 3


def test_a_busy_host_runs_the_one_statement(fresh_database, settings, keyword_arms, monkeypatch):
    index(fresh_database, settings, corpus(9, 30))
    request = request_for("replica log replay")
    expected = fields_of(fresh_database.read(lambda s: hybrid_search(s, request)))
    monkeypatch.setattr(parallel_search, "has_idle_core", lambda engine: False)
    assert fields_of(fresh_database.read(lambda s: fused_search(s, request))) == expected
    assert keyword_arms == []


@pytest.mark.parametrize(
    ("url", "running", "idle"),
    [
        ("postgresql+psycopg://u@/rag?host=/tmp/socket&port=5433", 1, True),  # the embedded server: a socket
        ("postgresql+psycopg://u@/rag?host=/tmp/socket&port=5433", 2, False),  # the search and one other task
        ("postgresql+psycopg://u@localhost:5432/rag", 1, True),
        ("postgresql+psycopg://u@127.0.0.1:5432/rag", 3, False),
        ("postgresql+psycopg://u@db.internal:5432/rag", 9, True),  # another host: its load is not ours to see
    ],
)
def test_an_idle_core_is_judged_on_this_host_only(url, running, idle):
    engine = create_engine(url)
    assert has_idle_core(engine, running=running, cores=2) is idle  # the real one: imported before the fixture


def test_the_running_tasks_of_this_host_count_this_one():
    assert parallel_search._running_tasks() >= 1 and parallel_search._usable_cores() >= 1
