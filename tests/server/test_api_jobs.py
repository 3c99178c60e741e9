"""Body limits, large ingests as jobs with live progress, and one log line per unexpected error.

Over real uvicorn servers and the module's real PostgreSQL; the job is held at chosen points by events
inside its embedder, never by sleeps.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
import uvicorn

from rag_service.config import Settings
from rag_service.db.database import Database
from rag_service.embed import HashingEmbedder
from rag_service.ingest import batch
from rag_service.server import ServerConfig, create_app
from rag_service.service import UniversalRAGService
from tests.server.conftest import WRITE_TOKEN, LiveServer, start_server


class GatedEmbedder(HashingEmbedder):
    """Hashing vectors; the document batches named in ``gates`` wait for their release event."""

    def __init__(self, gates: dict[int, tuple[threading.Event, threading.Event]]) -> None:
        super().__init__()
        self.gates = gates
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        self.calls += 1
        if self.calls in self.gates:
            reached, release = self.gates[self.calls]
            reached.set()
            assert release.wait(timeout=60), "the test never released the embedder"
        return super().embed_documents(texts)


def test_json_documents_get_the_body_limit_not_the_upload_limit(serve) -> None:  # type: ignore[no-untyped-def]
    live = serve(max_body_bytes=64 * 1024, max_upload_bytes=10 * 1024 * 1024)
    document = {"source": "big.md", "text": "kites fly on the wind. " * 4000}  # ~92 KB
    with live.client(WRITE_TOKEN) as client:
        response = client.post("/api/documents", json={"collection": "limits", "documents": [document]})
        upload = client.post("/api/documents", data={"collection": "limits"},
                             files=[("files", ("big.md", document["text"].encode(), "text/markdown"))])
    assert response.status_code == 413, response.text
    assert "65536 bytes" in response.json()["error"]["message"]
    assert upload.status_code in (200, 202), upload.text


def test_large_ingest_is_a_job_whose_progress_counts_documents(
    server_database: Database, server_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch, "EMBED_BATCH_CHUNKS", 2)  # a batch (one commit) per two one-chunk documents
    first, third = (threading.Event(), threading.Event()), (threading.Event(), threading.Event())
    embedder = GatedEmbedder({1: first, 3: third})
    service = UniversalRAGService(server_settings, database=server_database, embedder=embedder, reranker=None)
    live = start_server(service, ServerConfig(token=WRITE_TOKEN, job_threshold_chars=100))  # type: ignore[arg-type]
    collection = f"job-{uuid.uuid4().hex[:8]}"
    documents = [{"source": f"d{i}.md", "text": f"Document {i} tells of tide {i} in the harbour."} for i in range(10)]
    try:
        with live.client(WRITE_TOKEN) as client:
            started = client.post("/api/documents", json={"collection": collection, "documents": documents})
            assert started.status_code == 202, started.text
            assert started.json()["job"]["progress"]["total"] == 10, "the 202 answer knows the total (README)"
            location = started.headers["location"]
            assert first[0].wait(timeout=60)
            before = client.get(location).json()["job"]
            # nothing committed yet, so the collection does not exist: this was a 404 unknown_collection
            rerun = client.post("/api/documents/reindex-all", json={"collection": collection})
            assert rerun.status_code == 409 and rerun.json()["error"]["code"] == "job_conflict", rerun.text
            first[1].set()
            assert third[0].wait(timeout=60)
            during = client.get(location).json()["job"]
            third[1].set()
            live.server.config.app.state.rag.jobs.shutdown(wait=True)
            after = client.get(location).json()["job"]
    finally:
        first[1].set()
        third[1].set()
        live.stop()
    assert before["state"] == "running" and before["progress"]["done"] == 0 and before["progress"]["total"] == 10
    assert during["state"] == "running" and 2 <= during["progress"]["done"] < 10, during
    assert after["state"] == "succeeded"
    progress = after["progress"]
    assert {k: progress[k] for k in ("done", "total", "fraction", "phase")} == {
        "done": 10,
        "total": 10,
        "fraction": 1.0,
        "phase": None,
    }
    assert progress["chunks_written"] == after["counts"]["chunks_written"] > 0
    assert after["counts"]["added"] == 10


@pytest.fixture
def failing_server(server_service: UniversalRAGService) -> Iterator[LiveServer]:
    """A real uvicorn server whose retrieve raises an unexpected error, logging through the root logger."""

    def broken(*args: object, **kwargs: object) -> object:
        raise ZeroDivisionError("forced for the test")

    service = UniversalRAGService(
        server_service.settings, database=server_service.db, embedder=HashingEmbedder(), reranker=None
    )
    service.retrieve = broken  # type: ignore[method-assign]
    app = create_app(service, ServerConfig(token=None))  # type: ignore[arg-type]
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on")  # uvicorn logs to root
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    started = threading.Event()
    config.callback_notify = None
    thread.start()
    while not server.started and thread.is_alive():
        started.wait(0.02)  # uvicorn offers no start event; this bounded wait only paces the check
    port = server.servers[0].sockets[0].getsockname()[1]
    live = LiveServer(f"http://127.0.0.1:{port}", service, server, thread)
    yield live
    live.stop()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_an_unexpected_error_is_one_log_line(failing_server: LiveServer) -> None:
    handler = _Records()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with failing_server.client() as client:
            response = client.post("/api/rag/retrieve", json={"query": "backups"})
    finally:
        root.removeHandler(handler)
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal_error"
    errors = [r for r in handler.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    line = logging.Formatter().format(errors[0])
    assert "\n" not in line and "ZeroDivisionError: forced for the test" in line and "/api/rag/retrieve" in line
