"""Citus with one worker down: the collections on the other workers are read, written and reported as before.

A cluster of its own (a coordinator and 2 workers), two collections placed on different workers, then one worker
stopped. Its errors used to count as a lost coordinator, opening the circuit breaker for every collection; an
ingest into a healthy worker's collection failed at COMMIT (the context and graph writes sent intermediate results
to every worker); ``rag db status`` printed one error and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, event, text

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.status import read_status
from rag_service.embed import HashingEmbedder
from rag_service.errors import NodeUnavailableError
from rag_service.service import UniversalRAGService
from tests.citus_cluster import CitusCluster
from tests.integration.test_vector_storage import LONG_SECTION

pytestmark = pytest.mark.slow

_PLACEMENT = text(
    "SELECT nodename || ':' || nodeport FROM pg_dist_shard_placement "
    "WHERE shardid = get_shard_id_for_distribution_column('documents', CAST(:c AS text))"
)


@dataclass
class Down:
    engine: Engine
    service: UniversalRAGService
    healthy: str  # a collection on the worker still up
    lost: str  # a collection on the worker stopped
    worker: str  # host:port of the stopped worker


@pytest.fixture(scope="module")
def down() -> Iterator[Down]:
    cluster = CitusCluster.start(workers=2, shards=8)
    engine = make_engine(cluster.coordinator.url, Settings(database_url=cluster.coordinator.url))
    try:
        migrate.upgrade(engine)
        settings = Settings(database_url=cluster.coordinator.url, pool_size=2, pool_max_overflow=2)
        service = UniversalRAGService(settings, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
        placed: dict[str, str] = {}
        with engine.connect() as conn:
            for name in (f"team-{i}" for i in range(64)):
                placed.setdefault(conn.execute(_PLACEMENT, {"c": name}).scalar_one(), name)
        assert len(placed) == 2, placed
        (worker, lost), (_, healthy) = sorted(placed.items())
        for name in (healthy, lost):
            body = f"# Replicas of {name}\n\nA standby replays the write-ahead log of {name}.\n"
            assert service.index_texts([(f"{name}.md", "", body)], collection=name).added == 1
        cluster.stop_node(next(node for node in cluster.nodes if worker.endswith(f":{node.port}")))
        yield Down(engine, service, healthy, lost, worker)
    finally:
        engine.dispose()
        cluster.stop()


def test_a_worker_down_fails_only_its_collections_and_names_it(down):
    statements: list[str] = []

    def sent(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(down.engine, "before_cursor_execute", sent)
    try:
        for _ in range(6):  # past the breaker's threshold of 5: the coordinator's circuit stays closed
            with pytest.raises(NodeUnavailableError, match=f"the node {down.worker} it reaches for this data did"):
                down.service.retrieve("write-ahead log", context="search", collection=down.lost)
    finally:
        event.remove(down.engine, "before_cursor_execute", sent)
    # each call sent its one read once: not retried (a worker that does not answer costs Citus' connect timeout)
    assert len([s for s in statements if "rag_configurations" in s]) == 6
    result = down.service.retrieve("write-ahead log", context="search", collection=down.healthy)
    assert [c.source for c in result.chunks] == [f"{down.healthy}.md"] and result.metrics.degraded == []
    assert down.service.db.breaker.check(down.service.db.url_for_display) is None


def test_an_ingest_into_a_healthy_workers_collection_is_written(down):
    twins = [("twin-a.md", "", LONG_SECTION), ("twin-b.md", "", LONG_SECTION.replace("order", "sequence"))]
    report = down.service.index_texts(twins, collection=down.healthy, strategy="markdown")
    assert report.ok and report.added == 2, report.failed
    assert [line.split(" (")[0] for line in report.degraded] == ["statistics: not refreshed after this run's writes"]
    with down.engine.connect() as conn:
        counts = conn.execute(
            text(
                "SELECT (SELECT count(*) FROM document_contexts WHERE collection = :c), "
                "(SELECT count(*) FROM chunk_edges WHERE collection = :c AND kind = 'similar')"
            ),
            {"c": down.healthy},
        ).one()
    assert counts[0] >= 3 and counts[1] > 0  # the contexts and the similarity edges of the new documents


def test_status_names_the_worker_down_and_reports_the_rest(down):
    lines = read_status(down.engine).lines()
    layout = next(line for line in lines if line.startswith("layout:"))
    assert layout.startswith("layout:     Citus coordinator, 2 workers (") and f"{down.worker} DOWN" in layout
    unread = [line for line in lines if line.startswith("unread:")]
    assert [line.split(":")[1].strip() for line in unread] == ["collections", "sizes"]
    assert all(f"the node {down.worker}" in line for line in unread)
    assert any(line.startswith("schema:") and line.endswith(")") for line in lines)  # at head: no advice
    assert not [line for line in lines if line.startswith("documents:")]  # not "none": they could not be read
