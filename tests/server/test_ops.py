"""Liveness, readiness, Prometheus metrics, and 503 + Retry-After through a real database outage."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url

from rag_service.config import Settings
from rag_service.db.breaker import CircuitBreaker
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.server import ServerConfig
from rag_service.service import UniversalRAGService
from tests.conftest import DatabaseFactory
from tests.server.conftest import DOCS, WRITE_TOKEN, LiveServer, start_server
from tests.server.proxy import SocketProxy


def test_healthz_readyz_and_metrics(live: LiveServer) -> None:
    with live.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}
        client.post("/api/rag/retrieve", json={"query": "backups"})
        client.post("/api/rag/retrieve", json={"query": ""})
        response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'rag_http_requests_total{method="POST",route="/api/rag/retrieve",status="200"}' in text
    assert 'rag_http_requests_total{method="POST",route="/api/rag/retrieve",status="422"}' in text
    assert 'rag_http_request_duration_seconds_bucket{le="0.005",route="/api/rag/retrieve"}' in text
    for stage in ("embedding", "retrieval", "rerank", "mmr", "format", "total"):
        assert f'rag_retrieval_stage_duration_seconds_count{{stage="{stage}"}}' in text
    assert "rag_db_pool_checked_out " in text and "rag_db_pool_size " in text
    assert "rag_db_circuit_open 0.0" in text


def test_head_answers_as_get_without_a_body(live: LiveServer) -> None:
    """Uptime checks and load balancers send HEAD; every GET route answered 405."""
    with live.client() as client:
        for path in ("/healthz", "/readyz", "/", "/api/collections"):
            got, head = client.get(path), client.head(path)
            assert head.status_code == got.status_code == 200, (path, head.status_code)
            assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
            assert head.headers["content-length"] == str(len(got.content)), path
        assert client.head("/api/rag/retrieve").status_code == 405  # a POST route answers no HEAD either
        exposition = client.get("/metrics").text
    # counted under their routes, not "unmatched" (the app's routers are routes without a path of their own)
    for route in ("/healthz", "/api/collections"):
        assert f'rag_http_requests_total{{method="HEAD",route="{route}",status="200"}}' in exposition, route


@pytest.fixture
def outage(database_factory: DatabaseFactory, settings: Settings) -> Iterator[tuple[LiveServer, SocketProxy]]:
    """A server whose database is reached through a proxy the test can take down."""
    url = make_url(database_factory.create("rag_outage"))
    folder = Path(tempfile.mkdtemp(prefix="rag_proxy_", dir="/tmp"))
    proxy = SocketProxy(folder, f"{url.query['host']}/.s.PGSQL.{url.query.get('port', '5432')}")
    proxy.up()
    engine = make_engine(url.update_query_dict({"host": str(folder)}).render_as_string(False), settings)
    from rag_service.db import migrate

    migrate.upgrade(engine)
    database = Database(engine, breaker=CircuitBreaker(threshold=3, cooldown=1.0), retries=1, backoff=0.05)
    service = UniversalRAGService(settings, database=database, embedder=HashingEmbedder(), reranker=None)
    service.index_texts([(n, "", t) for n, t in DOCS.items()], collection="default", strategy="markdown")
    live = start_server(service, ServerConfig(token=WRITE_TOKEN, retry_after_s=2))  # type: ignore[arg-type]
    yield live, proxy
    live.stop()
    proxy.down()
    engine.dispose()
    shutil.rmtree(folder, ignore_errors=True)


def test_database_outage_is_503_with_retry_after_then_recovers(outage: tuple[LiveServer, SocketProxy]) -> None:
    live, proxy = outage
    query = {"query": "backups", "context": "agent"}
    with live.client() as client:
        assert client.post("/api/rag/retrieve", json=query).status_code == 200
        proxy.down()
        seen = [client.post("/api/rag/retrieve", json=query) for _ in range(4)]
        for response in seen:
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) >= 1
            body = response.json()
            assert body["success"] is False and body["error"]["code"] == "database_unavailable"
            assert "Traceback" not in response.text
        assert "circuit open" in seen[-1].json()["error"]["message"]
        assert client.get("/healthz").status_code == 200
        not_ready = client.get("/readyz")
        assert not_ready.status_code == 503 and "retry-after" in not_ready.headers
        assert client.get("/api/collections").status_code == 503
        proxy.up()
        import time

        deadline = time.monotonic() + 15  # the circuit's cool-down is 1 s; readiness closes it after that
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert client.post("/api/rag/retrieve", json=query).status_code == 200


def test_readyz_answers_in_time_while_the_database_is_frozen(outage: tuple[LiveServer, SocketProxy]) -> None:
    """A database that takes connections and answers nothing (SIGSTOP, an overloaded host) held /readyz forever."""
    import time

    from rag_service.server.ops import READY_TIMEOUT_S

    live, proxy = outage
    with live.client() as client:
        assert client.get("/readyz").status_code == 200
        proxy.freeze()
        try:
            for _ in range(2):  # the second finds the first check still stuck on the database
                started = time.monotonic()
                response = client.get("/readyz", timeout=READY_TIMEOUT_S + 10)
                assert time.monotonic() - started < READY_TIMEOUT_S + 2
                assert response.status_code == 503 and "retry-after" in response.headers
                assert f"did not answer within {READY_TIMEOUT_S:g} s" in response.json()["error"]["message"]
        finally:
            proxy.thaw()
        deadline = time.monotonic() + 15
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_writes_during_an_outage_are_503_and_one_line(outage: tuple[LiveServer, SocketProxy]) -> None:
    """The run's lock connection (``db.locks.reindex_lock``) raised the driver's error: HTTP 500, a bare
    OperationalError from Python, a reason-less MCP tool error."""
    from rag_service.errors import DatabaseUnavailableError

    live, proxy = outage
    proxy.down()
    with live.client(WRITE_TOKEN) as client:
        response = client.post(
            "/api/documents", json={"collection": "kb", "documents": [{"source": "n.md", "text": "# N\nhello"}]}
        )
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "database_unavailable" and "retry-after" in response.headers
    with pytest.raises(DatabaseUnavailableError, match=r"^lost the connection to .*retried") as caught:
        live.service.index_texts([("n.md", "", "# N\nhello")], collection="kb")
    assert "\n" not in str(caught.value)


def test_a_pool_with_no_free_connection_is_503_naming_the_pool_settings(
    database_factory: DatabaseFactory, settings: Settings
) -> None:
    """The pool's own TimeoutError (not a driver error) was an HTTP 500 after 30 s."""
    from sqlalchemy import create_engine

    from rag_service.db import migrate
    from rag_service.errors import PoolExhaustedError

    url = database_factory.create("rag_pool")
    migrator = make_engine(url, settings)
    migrate.upgrade(migrator)
    migrator.dispose()
    engine = create_engine(url, pool_size=2, max_overflow=0, pool_timeout=0.5)  # an ingest needs two
    service = UniversalRAGService(settings, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
    service.index_texts([(n, "", t) for n, t in DOCS.items()], collection="default", strategy="markdown")
    live = start_server(service, ServerConfig(token=None, retry_after_s=2))  # type: ignore[arg-type]
    held = [engine.connect(), engine.connect()]  # the pool's connections, in use elsewhere
    try:
        with live.client() as client:
            response = client.post("/api/rag/retrieve", json={"query": "backups"})
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "database_busy" and "retry-after" in response.headers
        message = response.json()["error"]["message"]
        assert "RAG_POOL_SIZE" in message and "RAG_POOL_MAX_OVERFLOW" in message and "\n" not in message
        with pytest.raises(PoolExhaustedError):
            service.index_texts([("n.md", "", "# N\nhello")], collection="kb")
        assert service.db.breaker.state == "closed"  # a busy pool is no dead database
    finally:
        for connection in held:
            connection.close()
        live.stop()
        engine.dispose()
