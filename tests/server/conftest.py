"""A real uvicorn server on loopback around a service on its own migrated database."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.server import ServerConfig, create_app
from rag_service.server.connections import uvicorn_options
from rag_service.server.hosts import HostPolicy
from rag_service.service import UniversalRAGService
from tests.conftest import DatabaseFactory

WRITE_TOKEN = "write-token-for-tests"
READ_TOKEN = "read-token-for-tests"

DOCS = {
    "ops.md": """# Operations

## Backups

Nightly backups run with pg_dump at two in the morning. Each backup is kept for thirty days and a
weekly copy is shipped to cold storage so a restore can go back up to a year.

Restoring a backup means creating a fresh database and loading the dump with pg_restore, then
re-running the migrations so the schema matches the code that will read it.

## Replication

A streaming replica follows the primary with a few milliseconds of lag. Failover promotes the replica
and points the service at it through the connection string in RAG_DATABASE_URL.
""",
    "search.md": """# Search

## Hybrid search

The vector arm finds chunks by meaning through the HNSW index, the keyword arm finds exact terms through
the GIN index on the stored tsvector, and reciprocal rank fusion merges both rankings into one list.
""",
}


@dataclass
class LiveServer:
    """A running server: its base URL, the service behind it and an HTTP client."""

    url: str
    service: UniversalRAGService
    server: uvicorn.Server
    thread: threading.Thread

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_server(
    service: UniversalRAGService,
    config: ServerConfig,
    *,
    warm: bool = True,
    hosts: HostPolicy | None = None,
    bounded: bool = False,
) -> LiveServer:
    """Serve ``create_app(service, config)`` with uvicorn on a free loopback port, in a thread;
    with ``warm``, return once its warm-up is done (a reranker that blocks would block that too).
    ``hosts``: the Host names it answers (default: those of a server bound to 127.0.0.1); ``bounded``: with
    ``rag serve``'s connection bounds (``server/connections.py``)."""
    app = create_app(service, config, hosts=hosts)
    options = uvicorn_options(config) if bounded else {}
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", **options)
    )
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    warming = app.state.rag.warming if warm else None  # ready as `rag serve` is once /readyz says so
    while warming is not None and not warming.done():
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not warm up")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return LiveServer(f"http://127.0.0.1:{port}", service, server, thread)


@pytest.fixture(scope="module")
def server_database(database_factory: DatabaseFactory, settings: Settings) -> Iterator[Database]:
    """A migrated database of this module's own whose transactions really commit."""
    engine = make_engine(database_factory.create("rag_server"), settings)
    migrate.upgrade(engine)
    yield Database(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def server_settings(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Test settings with a data folder of this module's own (uploads land there)."""
    return dataclasses.replace(settings, data_dir=tmp_path_factory.mktemp("rag_data"))


@pytest.fixture(scope="module")
def server_service(server_database: Database, server_settings: Settings) -> UniversalRAGService:
    """A service with the hashing embedder and no reranker, with DOCS indexed in 'default'."""
    service = UniversalRAGService(server_settings, database=server_database, embedder=HashingEmbedder(), reranker=None)
    report = service.index_texts(
        [(name, "", text) for name, text in DOCS.items()], collection="default", strategy="markdown"
    )
    assert report.ok and report.added == len(DOCS)
    return service


@pytest.fixture(scope="module")
def serve(server_service: UniversalRAGService) -> Iterator[Callable[..., LiveServer]]:
    """Start servers with a given config (default: write and read tokens set); all stop at the end."""
    started: list[LiveServer] = []

    def start(**config: object) -> LiveServer:
        values: dict[str, object] = {"token": WRITE_TOKEN, "read_token": None} | config
        live = start_server(server_service, ServerConfig(**values))  # type: ignore[arg-type]
        started.append(live)
        return live

    yield start
    for live in started:  # all at once: each takes up to a few ticks of uvicorn's loop to stop
        live.server.should_exit = True
    for live in started:
        live.stop()


@pytest.fixture(scope="module")
def live(serve: Callable[..., LiveServer]) -> LiveServer:
    """The default server: writes need WRITE_TOKEN, reads are open."""
    return serve()
