"""Configured limits, statement timeouts and multipart reports over a real uvicorn server and PostgreSQL."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import fields

import psycopg
import pytest
from sqlalchemy import text

from rag_service.config import Settings
from rag_service.db.admin import admin_params
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.ingest.report import FileProblem, IngestReport
from rag_service.knobs import MAX_QUERY_CHARS
from rag_service.server import ServerConfig
from rag_service.service import UniversalRAGService
from tests.server.conftest import WRITE_TOKEN, LiveServer, start_server


@pytest.fixture
def timeout_server(server_service: UniversalRAGService, server_database: Database, server_settings: Settings
                   ) -> Iterator[LiveServer]:
    """A server on the module's (indexed) database whose connections have a 300 ms statement timeout."""
    settings = dataclasses.replace(server_settings, statement_timeout_ms=300)
    engine = make_engine(server_database.engine.url.render_as_string(hide_password=False), settings)
    service = UniversalRAGService(settings, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
    live = start_server(service, ServerConfig(token=None))  # type: ignore[arg-type]
    yield live
    live.stop()
    engine.dispose()


def test_statement_timeout_is_a_503_naming_the_setting(timeout_server: LiveServer) -> None:
    url = timeout_server.service.db.engine.url.render_as_string(hide_password=False)
    query = {"query": "how are backups restored?", "context": "agent"}
    with timeout_server.client() as client:
        with psycopg.connect(**admin_params(url) | {"autocommit": False}) as holder:
            holder.execute("LOCK TABLE documents, document_chunks IN ACCESS EXCLUSIVE MODE")  # searches wait
            response = client.post("/api/rag/retrieve", json=query)
            holder.rollback()
        answered = client.post("/api/rag/retrieve", json=query)
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["code"] == "statement_timeout" and "RAG_STATEMENT_TIMEOUT_MS" in error["message"]
    assert "\n" not in error["message"] and response.headers["retry-after"]
    assert answered.status_code == 200 and answered.json()["result"]["chunks"], "without the lock it answers"


def test_max_query_chars_is_the_configured_limit(serve) -> None:  # type: ignore[no-untyped-def]
    strict, roomy = serve(max_query_chars=40), serve(max_query_chars=3000)
    with strict.client() as client:
        refused = client.post("/api/rag/retrieve", json={"query": "backups " * 6})
        accepted = client.post("/api/rag/retrieve", json={"query": "backups " * 5})
        beyond_any_setting = client.post("/api/rag/retrieve", json={"query": "x" * (MAX_QUERY_CHARS + 1)})
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "RAG_API_MAX_QUERY_CHARS" in message and "at most 40" in message and "48 characters" in message
    # longer than the library reads: still the one message naming the configured limit
    assert beyond_any_setting.status_code == 422, beyond_any_setting.text
    assert "at most 40 (the server's RAG_API_MAX_QUERY_CHARS)" in beyond_any_setting.json()["error"]["message"]
    assert accepted.status_code == 200, accepted.text
    with roomy.client() as client:
        long_query = client.post("/api/rag/retrieve", json={"query": "backups " * 300})  # 2400 > the old 2000
        too_long = client.post("/api/rag/retrieve", json={"query": "backups " * 400})
    assert long_query.status_code == 200, long_query.text
    assert too_long.status_code == 422 and "at most 3000" in too_long.json()["error"]["message"]


def test_by_default_a_pasted_traceback_is_accepted_and_searched_by_its_question(live) -> None:  # type: ignore[no-untyped-def]
    """The default was 2,000 characters: a question pasted after a traceback and a log (3,000-6,000) got 422, though
    the library reads 8,000 and searches such a query by its question (retrieve/focus.py)."""
    frame = '  File "/home/dev/.venv/lib/python3.12/site-packages/client/pool.py", line 715, in get\n    get()\n'
    trace = "Traceback (most recent call last):\n" + frame * 40 + "ConnectionRefusedError: [Errno 111] refused\n"
    query = trace + "\nHow is a backup restored into a fresh database?"
    assert 4000 < len(query) < MAX_QUERY_CHARS
    with live.client() as client:
        answered = client.post("/api/rag/retrieve", json={"query": query, "context": "search"})
        refused = client.post("/api/rag/retrieve", json={"query": "backups " * 1001})
    assert answered.status_code == 200, answered.text
    assert answered.json()["result"]["chunks"][0]["source"] == "ops.md"
    (line,) = [line for line in answered.json()["metrics"]["degraded"] if line.startswith("query: searched")]
    assert "left out 82 lines of traceback" in line
    assert refused.status_code == 422
    message = refused.json()["error"]["message"]
    assert message == "query: 8008 characters; send at most 8000 (the server's RAG_API_MAX_QUERY_CHARS)"


def test_costly_overrides_are_capped_by_the_server_settings(serve) -> None:  # type: ignore[no-untyped-def]
    """Any client of an open-reads server asked max_chunks=1000, candidate_k=1000, max_tokens=1000000 per call."""
    default, roomy = serve(), serve(max_chunks=200, max_candidate_k=1000, max_tokens=1_000_000)
    heavy = {"max_chunks": 1000, "candidate_k": 1000, "max_tokens": 1_000_000}
    with default.client() as client:
        refused = {
            knob: client.post("/api/rag/retrieve", json={"query": "backups", knob: value})
            for knob, value in heavy.items()
        }
        at_caps = client.post(
            "/api/rag/retrieve", json={"query": "backups", "max_chunks": 50, "candidate_k": 200, "max_tokens": 16000}
        )
    setting = {"max_chunks": "MAX_CHUNKS", "candidate_k": "MAX_CANDIDATE_K", "max_tokens": "MAX_TOKENS"}
    for knob, answer in refused.items():
        assert answer.status_code == 422, answer.text
        cap = {"max_chunks": 50, "candidate_k": 200, "max_tokens": 16000}[knob]
        assert answer.json()["error"]["message"] == (
            f"{knob}: {heavy[knob]}; send at most {cap} (the server's RAG_API_{setting[knob]}), "
            "or edit a preset (PUT /api/presets) for more"
        )
    assert at_caps.status_code == 200, at_caps.text
    with roomy.client() as client:
        assert client.post("/api/rag/retrieve", json={"query": "backups", **heavy}).status_code == 422  # 1000 > 200
        allowed = client.post("/api/rag/retrieve", json={"query": "backups", **heavy, "max_chunks": 200})
    assert allowed.status_code == 200, allowed.text


def test_too_many_documents_is_one_413_as_json_or_as_files(serve) -> None:  # type: ignore[no-untyped-def]
    """Files over the limit were a 422 naming the parser's limit (1000) and no setting."""
    live = serve(max_documents=3)
    documents = [{"source": f"d{i}.md", "text": f"# D{i}\n\nText {i}."} for i in range(4)]
    files = [("files", (d["source"], d["text"].encode(), "text/markdown")) for d in documents]
    with live.client(WRITE_TOKEN) as client:
        as_json = client.post("/api/documents", json={"collection": "many", "documents": documents})
        as_files = client.post("/api/documents", data={"collection": "many"}, files=files)
        unreadable = client.post("/api/documents", content=b'{"documents": "caf\xe9"}',
                                 headers={"content-type": "application/json"})  # fmt: skip
    assert as_json.status_code == as_files.status_code == 413, (as_json.text, as_files.text)
    assert as_json.json()["error"]["message"] == "4 documents in one call; send at most 3 (RAG_API_MAX_DOCUMENTS)"
    limit = "send at most 3 (RAG_API_MAX_DOCUMENTS)"
    assert as_files.json()["error"]["message"] == f"more than 3 files in one call; {limit}"
    assert unreadable.status_code == 400 and unreadable.json()["error"]["message"].startswith(
        "body is not UTF-8 (byte 0xe9 at offset 18)"
    )


def test_multipart_report_keeps_every_strategys_counts(  # type: ignore[no-untyped-def]
    server_service, server_database, server_settings
) -> None:
    # a dead LLM endpoint: each strategy's run degrades its summaries, and the upload must say so
    settings = dataclasses.replace(server_settings, llm_base_url="http://127.0.0.1:9/v1", llm_model="none-here")
    service = UniversalRAGService(settings, database=server_database, embedder=HashingEmbedder(), reranker=None)
    live = start_server(service, ServerConfig(token=WRITE_TOKEN))  # type: ignore[arg-type]
    collection = f"multi-{uuid.uuid4().hex[:8]}"
    tides = "Tides rise twice a day in the harbour basin and the pilots plan every berth around them. " * 12
    guide = f"# Guide\n\nThe guide explains the harbour; see [the notes](notes.txt).\n\n## Tides\n\n{tides}\n".encode()
    notes = b"Notes on the harbour: the tide tables are printed every spring by the harbour master.\n"
    try:
        with live.client(WRITE_TOKEN) as client:
            response = client.post(
                "/api/documents",
                data={"collection": collection},
                files=[("files", ("guide.md", guide, "text/markdown")), ("files", ("notes.txt", notes, "text/plain"))],
            )
    finally:
        live.stop()
    assert response.status_code == 200, response.text
    report = response.json()["report"]
    assert report["added"] == 2
    assert len(report["degraded"]) == 2 and all(line.startswith("summary: ") for line in report["degraded"])
    assert report["chunking_seconds"] > 0 and report["graph_seconds"] > 0
    with server_database.transaction() as session:
        edges = session.execute(
            text("SELECT count(*) FROM chunk_edges WHERE collection = :c"), {"c": collection}
        ).scalar_one()
    assert edges > 0 and report["edges_written"] == edges, report


def test_merging_keeps_every_field_of_a_report() -> None:
    total, part = IngestReport(collection="c"), IngestReport(collection="c")
    for spec in fields(IngestReport):  # every field set, so a field added later cannot be dropped silently
        value = getattr(part, spec.name)
        if isinstance(value, bool | str):
            continue
        if isinstance(value, int | float):
            setattr(part, spec.name, value + 2)
    part.failed, part.skipped = [FileProblem("a", "bad")], [FileProblem("b", "odd")]
    part.filtered, part.degraded = {"short": 3}, ["summary: the LLM failed"]
    part.without_chunks = ["empty.md"]
    total.merge(part)  # how the upload endpoint folds each strategy's run
    total.merge(part)
    expected = part.to_dict()
    for name, value in expected.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            expected[name] = value * 2
    expected["failed"] = expected["failed"] * 2
    expected["skipped"] = expected["skipped"] * 2
    expected["degraded"] = expected["degraded"] * 2
    expected["without_chunks"] = expected["without_chunks"] * 2
    expected["filtered"] = {"short": 6}
    assert total.to_dict() == expected
