"""The HTTP API end to end against a real uvicorn server and a real PostgreSQL."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from rag_service import NewDocument
from rag_service.embed import HashingEmbedder
from rag_service.errors import ConfigurationError
from rag_service.retrieve.rerank import FunctionReranker
from rag_service.server import ServerConfig
from rag_service.server.uploads import collection_folder
from rag_service.service import UniversalRAGService
from tests.server.conftest import WRITE_TOKEN, LiveServer, start_server


def test_retrieve_answers_the_prd_shape(live: LiveServer) -> None:
    with live.client() as client:
        response = client.post(
            "/api/rag/retrieve",
            json={"query": "how are backups restored?", "context": "agent", "max_chunks": 3, "max_tokens": 800},
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True
    result, metrics = body["result"], body["metrics"]
    assert set(result) >= {"formatted_context", "chunks", "total_tokens", "sources"}
    assert 0 < len(result["chunks"]) <= 3 and 0 < result["total_tokens"] <= 800
    assert "pg_restore" in result["formatted_context"]
    for chunk in result["chunks"]:
        assert set(chunk) >= {"content", "source", "headers", "relevance_score", "start_char", "end_char",
                              "match_start", "match_end"}
        assert chunk["start_char"] <= chunk["match_start"] <= chunk["match_end"] <= chunk["end_char"]
    assert result["chunks"][0]["source"] == "ops.md"
    assert all("summary" not in chunk for chunk in result["chunks"])  # issue 23.7: once per document instead
    documents = {d["document_id"]: d for d in result["documents"]}
    assert {c["document_id"] for c in result["chunks"]} == set(documents) and documents[
        result["chunks"][0]["document_id"]
    ]["summary"]
    assert set(metrics) >= {"retrieval_time_ms", "rerank_time_ms", "total_candidates", "after_rerank", "degraded"}
    assert metrics["degraded"] == []


def test_retrieve_same_chunks_as_in_process(live: LiveServer) -> None:
    query = {"query": "reciprocal rank fusion", "context": "search", "collection": "default"}
    with live.client() as client:
        over_http = client.post("/api/rag/retrieve", json=query | {"return_formatted": False}).json()
    in_process = live.service.retrieve("reciprocal rank fusion", context="search")
    assert over_http["result"]["formatted_context"] is None
    assert [c["chunk_id"] for c in over_http["result"]["chunks"]] == [c.chunk_id for c in in_process.chunks]
    assert over_http["result"]["chunks"] == [c.to_dict(summary=False) for c in in_process.chunks]
    assert over_http["result"]["documents"] == in_process.documents()


def test_overrides_and_filters_apply(live: LiveServer) -> None:
    with live.client() as client:
        response = client.post(
            "/api/rag/retrieve",
            json={
                "query": "replica failover",
                "context": "search",
                "max_chunks": 1,
                "return_parents": True,
                "keyword_weight": 0,
                "filters": {"source": "ops.md"},
            },
        )
    chunks = response.json()["result"]["chunks"]
    assert len(chunks) == 1 and chunks[0]["source"] == "ops.md" and chunks[0]["is_parent"] is True


def test_graph_weight_is_a_per_call_override(live: LiveServer) -> None:
    with live.client() as client:
        on = client.post("/api/rag/retrieve", json={"query": "replica failover", "graph_weight": 0.3})
        off = client.post("/api/rag/retrieve", json={"query": "replica failover"})
        bad = client.post("/api/rag/retrieve", json={"query": "replica failover", "graph_weight": 1.5})
    assert on.status_code == 200 and on.json()["metrics"]["graph_time_ms"] > 0
    assert off.json()["metrics"]["graph_time_ms"] == 0 and bad.status_code == 422


def test_bad_input_is_one_json_line_4xx(live: LiveServer) -> None:
    with live.client() as client:
        cases = {
            "empty query": ({"query": ""}, 422),
            "unknown context": ({"query": "x", "context": "nope"}, 404),
            "unknown override": ({"query": "x", "max_chunk": 3}, 422),
            "out of range": ({"query": "x", "diversity": 2}, 422),
            "graph weight out of range": ({"query": "x", "graph_weight": -0.1}, 422),
            "both weights zero": ({"query": "x", "vector_weight": 0, "keyword_weight": 0}, 422),
            "bad filter": ({"query": "x", "filters": {"colour": "red"}}, 422),
            "too long": ({"query": "x" * 9000}, 422),
        }
        for name, (body, status) in cases.items():
            response = client.post("/api/rag/retrieve", json=body)
            assert response.status_code == status, (name, response.text)
            error = response.json()
            assert error["success"] is False and error["error"]["code"], name
            assert "\n" not in error["error"]["message"] and "Traceback" not in response.text, name
        assert client.post("/api/rag/retrieve", content=b"{not json", headers={"content-type": "application/json"}
                           ).status_code == 422
        extra = client.post("/api/rag/retrieve", json={"query": "x", "max_chunk": 3}).json()["error"]["message"]
        assert extra.startswith("max_chunk: unknown field; did you mean max_chunks? the fields are ")
        assert "query" in extra
        nowhere = client.get("/api/nowhere").json()["error"]
        assert nowhere["code"] == "not_found"
        assert nowhere["message"].startswith("GET /api/nowhere: no such endpoint; search is POST /api/rag/retrieve")
        assert "did you mean GET /healthz?" in client.get("/health").json()["error"]["message"]
        assert "did you mean GET /api/presets?" in client.get("/api/preset").json()["error"]["message"]
        wrong = client.get("/api/documents")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "DELETE, POST"
        message = wrong.json()["error"]["message"]
        assert message == "GET /api/documents is not allowed; /api/documents takes DELETE, POST"


@pytest.mark.parametrize("alias", ["k", "top_k"])
def test_a_count_alias_is_pointed_to_max_chunks(live: LiveServer, alias: str) -> None:
    """Python and the CLI hinted max_chunks for another library's name of the count; the API did not (audit 53b 6)."""
    with live.client(WRITE_TOKEN) as client:
        retrieve = client.post("/api/rag/retrieve", json={"query": "x", alias: 3})
        put = client.put("/api/presets/workflow", json={alias: 3})
    for response in (retrieve, put):
        assert response.status_code == 422
        message = response.json()["error"]["message"]
        assert message.startswith(f"{alias}: unknown field; did you mean max_chunks? the fields are "), message


def test_documents_json_then_delete(live: LiveServer) -> None:
    collection = f"api-{uuid.uuid4().hex[:8]}"
    text = "# Kites\n\nA kite flies on the wind when the line holds it against the moving air above the field."
    with live.client(WRITE_TOKEN) as client:
        added = client.post("/api/documents", json={"collection": collection, "strategy": "markdown",
                                                    "documents": [{"source": "kites.md", "text": text}]})
        assert added.status_code == 200 and added.json()["report"]["added"] == 1, added.text
        names = {c["name"]: c for c in client.get("/api/collections").json()["collections"]}
        assert names[collection]["documents"] == 1 and names[collection]["chunks"] >= 1
        found = client.post("/api/rag/retrieve", json={"query": "kite wind", "collection": collection}).json()
        assert found["result"]["chunks"][0]["source"] == "kites.md"
        gone = client.delete("/api/documents", params={"source": "kites.md", "collection": collection})
        assert gone.status_code == 200 and gone.json()["deleted"] == 1
        again = client.delete("/api/documents", params={"source": "kites.md", "collection": collection})
        assert again.status_code == 404 and "kites.md" in again.json()["error"]["message"]
        # a new user's guess: the fields in a JSON body (it said "query.source: Field required")
        guessed = client.request("DELETE", "/api/documents", json={"source": "kites.md", "collection": collection})
        assert guessed.status_code == 422 and guessed.json()["error"]["message"] == (
            "source: a query parameter, missing; send DELETE /api/documents?source=<source>&collection=<collection>; "
            "a body is not read here"
        )
        misnamed = client.post("/api/documents", data={"collection": collection},
                               files=[("file", ("kites.md", text.encode(), "text/markdown"))])
        assert misnamed.status_code == 422 and misnamed.json()["error"]["message"] == (
            "unknown multipart field(s) ['file']; did you mean 'files'? use files, collection, strategy"
        )


def test_one_source_twice_in_a_request_is_refused_as_json_and_as_files(live: LiveServer) -> None:
    """The second document replaced the first while the report said "added 2"; a large request became a job."""
    collection = f"dup-{uuid.uuid4().hex[:8]}"
    body = b"# Lighthouses\n\nA lighthouse keeper trims the lamp wick every evening before the ships come in."
    with live.client(WRITE_TOKEN) as client:
        large = "x " * 60_000  # over the job threshold: refused before a job starts
        documents = [{"source": "d.md", "text": "# One\n\nfirst"}, {"source": "d.md", "text": large}]
        refused = client.post("/api/documents", json={"collection": collection, "documents": documents})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["message"].startswith("documents of this call share a source: 'd.md' (2 times)")
        files = [("files", ("same.md", body, "text/markdown")), ("files", ("same.md", body, "text/markdown"))]
        uploaded = client.post("/api/documents", data={"collection": collection}, files=files)
        assert uploaded.status_code == 422 and "'same.md' (2 times)" in uploaded.json()["error"]["message"]
        names = {c["name"] for c in client.get("/api/collections").json()["collections"]}
        assert collection not in names


def test_multipart_upload_stays_in_the_data_folder_and_is_not_kept(live: LiveServer) -> None:
    collection = f"up-{uuid.uuid4().hex[:8]}"
    uploads = live.service.settings.data_dir / "uploads"
    body = b"# Lighthouses\n\nA lighthouse keeper trims the lamp wick every evening before the ships come in."
    with live.client(WRITE_TOKEN) as client:
        ok = client.post("/api/documents", data={"collection": collection},
                         files=[("files", ("light.md", body, "text/markdown")), ("files", ("x.exe", b"MZ\x90", "x"))])
        assert ok.status_code == 200 and ok.json()["report"]["added"] == 1, ok.text
        assert [f["source"] for f in ok.json()["report"]["failed"]] == ["x.exe"]
        only = client.post("/api/documents", data={"collection": collection},
                           files=[("files", ("x.exe", b"MZ\x90", "x")), ("files", ("y.bin", b"\x00", "x"))])
        assert only.status_code == 422 and only.json()["error"]["code"] == "unsupported_file_type", only.text
        assert only.json()["error"]["message"].startswith("cannot index x.exe, y.bin: their file types are not")
        assert not [p for p in uploads.rglob("*") if p.is_file()], "neither the indexed nor the refused file is kept"
        for name in ("../evil.md", "..\\evil.md", "/etc/evil.md", "a/../../evil.md", ".hidden.md", "C:evil.md"):
            refused = client.post("/api/documents", data={"collection": collection},
                                  files=[("files", (name, body, "text/markdown"))])
            assert refused.status_code == 422, (name, refused.text)
            assert "plain file name" in refused.json()["error"]["message"]
        bad = client.post("/api/documents", data={"collection": "../../x"},
                          files=[("files", ("ok.md", body, "text/markdown"))])
        assert bad.status_code == 200
        # a file kept by an older server (uploads/<collection folder>/) goes with its document
        legacy = collection_folder(uploads, collection) / "light.md"
        legacy.parent.mkdir(parents=True, exist_ok=True)
        legacy.write_bytes(body)
        gone = client.delete("/api/documents", params={"source": "light.md", "collection": collection})
        assert gone.status_code == 200 and not legacy.exists()
    data_dir = live.service.settings.data_dir.resolve()
    assert not list(data_dir.parent.glob("evil.md")) and not list(data_dir.rglob("evil.md"))
    assert not [p for p in uploads.rglob("*") if p.is_file()]


def test_a_delete_by_a_path_ending_a_stored_source_names_that_source(live: LiveServer) -> None:
    collection = f"api-{uuid.uuid4().hex[:8]}"
    stored = "/srv/corpora/corpA/errors.md"  # indexed from a folder outside any checkout: an absolute key
    with live.client(WRITE_TOKEN) as client:
        added = client.post("/api/documents", json={"collection": collection,
                                                    "documents": [{"source": stored, "text": "# Errors\n\nOne line."}]})
        assert added.status_code == 200, added.text
        missed = client.delete("/api/documents", params={"source": "corpA/errors.md", "collection": collection})
        assert missed.status_code == 404 and missed.json()["error"]["message"] == (
            f"collection {collection!r} has no document with source 'corpA/errors.md'; did you mean {stored!r}? "
            "(the stored source, as listed in results)"
        )
        other = client.delete("/api/documents", params={"source": "rrors.md", "collection": collection})
        assert other.json()["error"]["message"].endswith("has no document with source 'rrors.md'")  # no hint
        assert client.delete("/api/documents", params={"source": stored, "collection": collection}).status_code == 200


def test_a_delete_by_a_files_disk_path_names_its_key_in_the_checkout(live: LiveServer) -> None:
    collection = f"api-{uuid.uuid4().hex[:8]}"
    stored = "docs/scale-out.md"  # indexed from a checkout: the key is relative to it
    with live.client(WRITE_TOKEN) as client:
        added = client.post("/api/documents", json={"collection": collection,
                                                    "documents": [{"source": stored, "text": "# Scale\n\nOne line."}]})
        assert added.status_code == 200, added.text
        on_disk = "/home/me/proj/docs/scale-out.md"
        missed = client.delete("/api/documents", params={"source": on_disk, "collection": collection})
        assert missed.status_code == 404 and missed.json()["error"]["message"] == (
            f"collection {collection!r} has no document with source {on_disk!r}; did you mean {stored!r}? "
            "(a file in a checkout is stored relative to it, as listed in results)"
        )
        for unrelated in ("/home/me/proj/xdocs/scale-out.md", "/home/me/proj/docs/scale-out.md.bak"):
            other = client.delete("/api/documents", params={"source": unrelated, "collection": collection})
            assert other.json()["error"]["message"].endswith(f"has no document with source {unrelated!r}")
        assert client.delete("/api/documents", params={"source": stored, "collection": collection}).status_code == 200


def test_a_write_with_a_trailing_slash_names_its_endpoint(live: LiveServer) -> None:
    with live.client(WRITE_TOKEN) as client:
        put = client.put("/api/presets/", json={"max_chunks": 6})  # was a bare 307 to /api/presets (GET only)
        assert put.status_code == 404, put.text
        assert put.json()["error"]["message"] == (
            "PUT /api/presets/: no such endpoint; did you mean PUT /api/presets/{context}? every endpoint is in "
            "/openapi.json"
        )
        listed = client.get("/api/presets/", follow_redirects=True)  # a read keeps its redirect
        assert listed.status_code == 200 and listed.json()["presets"]
        same = client.get("/api/presets/workflow").json()["preset"]["max_chunks"]  # the shared preset stays as it is
        edited = client.put("/api/presets/workflow/", json={"max_chunks": same}, follow_redirects=True)
        assert edited.status_code == 200 and edited.json()["preset"]["max_chunks"] == same


def test_booleans_are_json_true_or_false(live: LiveServer) -> None:
    with live.client(WRITE_TOKEN) as client:
        for value in ("yes", "off", "1", 0):
            refused = client.post("/api/rag/retrieve", json={"query": "x", "expand_query": value})
            assert refused.status_code == 422, refused.text
            message = refused.json()["error"]["message"]
            fix = "; send true or false without quotes" if isinstance(value, str) else ""
            assert message == f"expand_query ({value!r}) must be true or false{fix}"  # the library's line
        put = client.put("/api/presets/workflow", json={"rerank_enabled": "off"})
        assert put.status_code == 422 and put.json()["error"]["message"].startswith("rerank_enabled ('off') must be")
        forced = client.post("/api/documents", json={"documents": [{"source": "a", "text": "b"}], "force": 1})
        assert forced.status_code == 422 and forced.json()["error"]["message"].startswith("force: must be true")


@pytest.mark.parametrize(
    ("knob", "value", "message"),
    [  # pydantic's "Input should be greater than or equal to 1" named one bound and no fix (audit 53b 7)
        ("max_chunks", 0, "max_chunks (0) must be between 1 and 1000"),
        ("max_chunks", 3.0, "max_chunks (3.0) must be an int, not float; pass 3"),
        ("max_chunks", "3", "max_chunks ('3') must be a whole number; send 3 without quotes"),
        ("max_tokens", 10**30, "max_tokens (1000000000000000000000000000000) must be between 1 and 1000000"),
        ("diversity", ".5", "diversity ('.5') must be a number; send 0.5 without quotes"),
        ("min_relevance", -0.5, "min_relevance (-0.5) must be between 0 and 1"),
        ("fusion_method", "RRF", "fusion_method ('RRF') must be one of 'rrf', 'linear'"),
    ],
)
def test_a_bad_knob_value_gets_the_librarys_line(live: LiveServer, knob: str, value: object, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        live.service.preset("workflow", **{knob: value})
    assert str(raised.value) == message.partition("; send")[0]  # Python's line, but the fix of a JSON string
    with live.client(WRITE_TOKEN) as client:
        retrieve = client.post("/api/rag/retrieve", json={"query": "backups", knob: value})
        put = client.put("/api/presets/workflow", json={knob: value})
    for response in (retrieve, put):
        assert response.status_code == 422 and response.json()["error"]["message"] == message, response.text


def test_a_null_override_of_a_retrieve_call_is_not_given(live: LiveServer) -> None:
    """Documented (README, HTTP API): generated clients and LLM tool calls send an optional field as null; the
    preset's value applies. PUT refuses null (test_presets_list_and_validated_edit): a stored value must be one."""
    with live.client() as client:
        given = client.post("/api/rag/retrieve", json={"query": "backups", "max_chunks": None, "diversity": None})
        plain = client.post("/api/rag/retrieve", json={"query": "backups"})
    assert given.status_code == plain.status_code == 200, given.text
    assert given.json()["result"]["chunks"] == plain.json()["result"]["chunks"]


def test_presets_list_and_validated_edit(live: LiveServer) -> None:
    with live.client(WRITE_TOKEN) as client:
        presets = {p["context_type"]: p for p in client.get("/api/presets").json()["presets"]}
        assert set(presets) >= {"chatbot", "agent", "search", "workflow", "context_engineering"}
        bad = client.put("/api/presets/workflow", json={"diversity": 3})
        assert bad.status_code == 422
        bad_pair = client.put("/api/presets/workflow", json={"vector_weight": 0, "keyword_weight": 0})
        assert bad_pair.status_code == 422 and "both 0" in bad_pair.json()["error"]["message"]
        assert client.put("/api/presets/nope", json={"max_chunks": 2}).status_code == 404
        nulled = client.put("/api/presets/workflow", json={"max_chunks": None, "min_relevance": None})
        assert nulled.status_code == 422  # it said "no values to change"
        message = nulled.json()["error"]["message"]
        assert message == "max_chunks, min_relevance: null is no value; send one, or leave it out"
        try:
            edited = client.put("/api/presets/workflow", json={"max_chunks": 1})
            assert edited.status_code == 200 and edited.json()["preset"]["max_chunks"] == 1
            result = client.post("/api/rag/retrieve", json={"query": "backups", "context": "workflow"}).json()
            assert len(result["result"]["chunks"]) == 1
        finally:
            client.put("/api/presets/workflow", json={"max_chunks": presets["workflow"]["max_chunks"]})


def test_reindex_job_runs_and_a_second_gets_409(live: LiveServer) -> None:
    report = live.service.index_texts([("other.md", "", "# Other\n\nA second collection.")], collection="elsewhere")
    assert report.ok
    # a SHARE lock on the tables keeps the job's writes (not its reads) waiting: it stays running
    blocker = live.service.db.engine.connect()
    blocker.execute(text("LOCK TABLE documents, document_chunks IN SHARE MODE"))
    try:
        with live.client(WRITE_TOKEN) as client:
            started = client.post("/api/documents/reindex-all", json={"collection": "default"})
            assert started.status_code == 202, started.text
            job = started.json()["job"]
            assert started.headers["location"] == f"/api/jobs/{job['id']}"
            _wait(client, job["id"], until=lambda s: s["state"] == "running")
            second = client.post("/api/documents/reindex-all", json={"collection": "default"})
            everything = client.post("/api/documents/reindex-all", json={})
            other = client.post("/api/documents/reindex-all", json={"collection": "elsewhere"})
    finally:
        blocker.rollback()
        blocker.close()
    assert second.status_code == 409 and second.json()["error"]["code"] == "job_conflict"
    assert job["id"] in second.json()["error"]["message"]
    assert everything.status_code == 409 and other.status_code == 202
    with live.client(WRITE_TOKEN) as client:
        state = _wait(client, job["id"], until=lambda s: s["state"] not in ("queued", "running"))
        _wait(client, other.json()["job"]["id"], until=lambda s: s["state"] not in ("queued", "running"))
    assert state["state"] == "succeeded", state
    progress = state["progress"]
    assert {k: progress[k] for k in ("done", "total", "fraction", "phase")} == {
        "done": 2,
        "total": 2,
        "fraction": 1.0,
        "phase": None,
    }
    assert progress["chunks_written"] == state["counts"]["chunks_written"] > 0
    assert state["counts"]["updated"] == 2 and state["counts"]["failed"] == 0


def _wait(client: httpx.Client, job_id: str, *, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while not until(state := client.get(f"/api/jobs/{job_id}").json()["job"]):
        assert time.monotonic() < deadline, state
        time.sleep(0.02)
    return state


def test_unknown_job_is_404(live: LiveServer) -> None:
    """The line said jobs are kept until the server restarts; only running ones and the last 100 finished are."""
    with live.client() as client:
        answer = client.get("/api/jobs/does-not-exist")
        assert answer.status_code == 404
        assert answer.json()["error"]["message"] == (
            "no job 'does-not-exist'; the server keeps running jobs and the last 100 finished ones in memory until "
            "it restarts"
        )


def test_a_slow_retrieve_does_not_stall_the_server(  # type: ignore[no-untyped-def]
    server_service, server_database, server_settings
) -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow(query: str, document: str) -> float:
        entered.set()
        assert release.wait(timeout=60)
        return float(len(document))

    service = UniversalRAGService(
        server_settings, database=server_database, embedder=HashingEmbedder(), reranker=FunctionReranker(slow)
    )
    slow_server = start_server(service, ServerConfig(token=None), warm=False)  # type: ignore[arg-type]
    try:
        with ThreadPoolExecutor(1) as pool, slow_server.client() as client:
            pending = pool.submit(client.post, "/api/rag/retrieve", json={"query": "backups", "context": "agent"})
            assert entered.wait(timeout=30)
            # another connection, while the reranker blocks until released: any answer proves the server
            # was not stalled (the timeouts only turn a stalled server into a failure instead of a hang)
            with slow_server.client() as other:
                assert other.get("/healthz", timeout=30).status_code == 200
                assert other.get("/api/presets", timeout=30).status_code == 200
                quick = other.post("/api/rag/retrieve", json={"query": "backups", "rerank_enabled": False}, timeout=30)
                assert quick.status_code == 200
            assert not pending.done()
            release.set()
            response = pending.result(timeout=30)
        assert response.status_code == 200 and response.json()["metrics"]["reranker"] == "function"
    finally:
        release.set()
        slow_server.stop()


def test_degraded_stages_reach_metrics_and_prometheus(  # type: ignore[no-untyped-def]
    server_service, server_database, server_settings, tmp_path
) -> None:
    missing = tmp_path / "no-such-cross-encoder"
    settings = dataclasses.replace(server_settings, rerank_model=str(missing))
    service = UniversalRAGService(settings, database=server_database, embedder=HashingEmbedder())
    degraded_server = start_server(service, ServerConfig(token=None))  # type: ignore[arg-type]
    try:
        with degraded_server.client() as client:
            body = client.post("/api/rag/retrieve", json={"query": "backups", "context": "agent"}).json()
            scrape = client.get("/metrics").text
    finally:
        degraded_server.stop()
    assert body["success"] is True and body["result"]["chunks"]
    degraded = body["metrics"]["degraded"]
    assert len(degraded) == 1 and degraded[0].startswith("rerank: ") and str(missing) in degraded[0]
    assert 'rag_retrieval_degraded_total{stage="rerank"} 1.0' in scrape


def test_an_unknown_collection_is_404_naming_the_existing_ones(live: LiveServer) -> None:
    with live.client(WRITE_TOKEN) as client:
        retrieved = client.post("/api/rag/retrieve", json={"query": "backups", "collection": "defualt"})
        reindexed = client.post("/api/documents/reindex-all", json={"collection": "defualt"})
        known = client.post("/api/rag/retrieve", json={"query": "backups", "collection": "default"})
    for answer in (retrieved, reindexed):  # no 200 with nothing, no 202 job that "succeeds" with 0 documents
        assert answer.status_code == 404, answer.text
        error = answer.json()["error"]
        assert error["code"] == "unknown_collection"
        assert error["message"].startswith("collection 'defualt' does not exist; did you mean 'default'? ")
        assert "\n" not in error["message"]
    assert known.status_code == 200 and known.json()["result"]["chunks"]


def test_min_relevance_is_a_per_call_override_and_nothing_passing_is_said(live: LiveServer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from rag_service.retrieve.relevance import CALIBRATIONS, Calibration

    # the hashing fake has no calibration of its own; this curve stands in for a measured model's
    curve = Calibration(center=0.5, scale=0.05, background_weight=0)
    monkeypatch.setitem(CALIBRATIONS, HashingEmbedder().model_id, curve)
    with live.client() as client:
        unrelated = {"query": "zebra stripes across the savanna", "context": "agent"}
        kept = client.post("/api/rag/retrieve", json=unrelated | {"min_relevance": 0}).json()
        floored = client.post("/api/rag/retrieve", json=unrelated | {"min_relevance": 0.9}).json()
        bad = client.post("/api/rag/retrieve", json=unrelated | {"min_relevance": 1.5})
    assert kept["result"]["chunks"] and kept["metrics"]["filtered_below_relevance"] == 0
    assert kept["metrics"]["relevance"] == "calibrated"
    assert floored["success"] and floored["result"]["chunks"] == []
    assert floored["metrics"]["filtered_below_relevance"] == len(kept["result"]["chunks"])
    context = floored["result"]["formatted_context"]
    assert context.startswith("no relevant passages for 'zebra stripes across the savanna'")
    assert bad.status_code == 422 and "min_relevance" in bad.text


def test_a_broken_multipart_body_is_one_400_and_no_stray_log_line(live: LiveServer, caplog) -> None:  # type: ignore[no-untyped-def]
    """The parser logged "Expected boundary character 45, got 103 at index 2" to stderr, without the request; the
    answer was a 422, while the error table and the OpenAPI document say 400 for a broken multipart body."""
    broken = {"content-type": "multipart/form-data; boundary=yy"}
    with caplog.at_level(logging.DEBUG), live.client(WRITE_TOKEN) as client:
        refused = client.post("/api/documents", content=b"--xx\r\ngarbage\r\n", headers=broken)
        unbounded = client.post("/api/documents", content=b"--xx\r\n", headers={"content-type": "multipart/form-data"})
    assert refused.status_code == 400 and "multipart body could not be read" in refused.json()["error"]["message"]
    assert unbounded.status_code == 400 and refused.json()["error"]["code"] == "bad_request", unbounded.text
    assert not [record.getMessage() for record in caplog.records if record.name.startswith("python_multipart")]


def test_a_source_is_4096_characters_at_most_on_every_path_and_deletable(live: LiveServer) -> None:
    """MCP, Python and `rag reindex` stored sources of 5,000 characters that DELETE (max 1000) then refused."""
    collection = f"long-{uuid.uuid4().hex[:8]}"
    longest, over = "é" * 4093 + ".md", "s" * 4094 + ".md"  # é: a URL of 24 KB still reaches the route
    report = live.service.index_documents(
        [NewDocument(longest, "# Long\n\nThe longest source."), NewDocument(over, "# Over\n\nOne character more.")],
        collection=collection,
    )
    assert report.added == 1 and [p.source for p in report.failed] == [over]
    assert "its source is 4097 characters; a source may have at most 4096" in report.failed[0].reason
    with live.client(WRITE_TOKEN) as client:
        refused = client.post("/api/documents", json={"collection": collection,
                                                      "documents": [{"source": over, "text": "x"}]})  # fmt: skip
        too_long = client.delete("/api/documents", params={"source": over, "collection": collection})
        gone = client.delete("/api/documents", params={"source": longest, "collection": collection})
    assert refused.status_code == 422 and "at most 4096 characters" in refused.json()["error"]["message"]
    assert too_long.status_code == 422 and "at most 4096 characters" in too_long.json()["error"]["message"]
    assert gone.status_code == 200 and gone.json()["deleted"] == 1, gone.text


def test_a_body_fix_names_the_routes_own_body(live: LiveServer) -> None:
    """Every route said 'e.g. {"query": "backups"}', which the presets route then refused as an unknown field."""
    with live.client(WRITE_TOKEN) as client:
        preset = client.put("/api/presets/search", json=[])
        json_type = {"content-type": "application/json"}
        documents = client.post("/api/documents", content=b'{"documents": [', headers=json_type)
        reindex = client.post("/api/documents/reindex-all", json=[1])
        retrieve = client.post("/api/rag/retrieve", json=[])
    assert preset.status_code == 422 and preset.json()["error"]["message"] == (
        'body must be a JSON object, not list; send one JSON object, e.g. {"max_chunks": 6}, with the header '
        "Content-Type: application/json"
    )
    assert 'e.g. {"documents": [{"source": "notes.md", "text": "# Notes"}]}' in documents.json()["error"]["message"]
    assert 'e.g. {"collection": "default"}' in reindex.json()["error"]["message"], reindex.text
    assert 'e.g. {"query": "backups"}' in retrieve.json()["error"]["message"]


def test_a_body_not_sent_as_json_is_415_on_every_route(live: LiveServer) -> None:
    """POST /api/documents answered 415, the other JSON routes 422 for the same mistake."""
    sent = {"content": b"query=backups", "headers": {"content-type": "application/x-www-form-urlencoded"}}
    with live.client(WRITE_TOKEN) as client:
        answers = {
            "retrieve": client.post("/api/rag/retrieve", **sent),  # type: ignore[arg-type]
            "preset": client.put("/api/presets/search", **sent),  # type: ignore[arg-type]
            "reindex": client.post("/api/documents/reindex-all", **sent),  # type: ignore[arg-type]
            "documents": client.post("/api/documents", **sent),  # type: ignore[arg-type]
            "plain": client.post("/api/rag/retrieve", content=b'{"q": 1}', headers={"content-type": "text/plain"}),
        }
    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 415)
    assert {a.json()["error"]["code"] for a in answers.values()} == {"unsupported_media_type"}
    assert answers["preset"].json()["error"]["message"] == (
        "Content-Type is 'application/x-www-form-urlencoded', so the body was not read as JSON; send one JSON "
        'object, e.g. {"max_chunks": 6}, with the header Content-Type: application/json'
    )


def test_an_upload_without_a_file_name_is_named_so(live: LiveServer) -> None:
    """It was 'cannot index .: a file without a suffix is not supported' (the empty name read as a path)."""
    body = b'--zz\r\nContent-Disposition: form-data; name="files"; filename=""\r\n\r\n# Notes\r\n--zz--\r\n'
    with live.client(WRITE_TOKEN) as client:
        multipart = {"content-type": "multipart/form-data; boundary=zz"}
        response = client.post("/api/documents", content=body, headers=multipart)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"] == (
        "an uploaded file has no file name; send each file with a name such as notes.md"
    )


def test_a_405_outside_the_api_names_the_methods_its_allow_header_names(live: LiveServer) -> None:
    """'/ takes other methods' came with 'Allow: GET' for the page, /openapi.json and the static files."""
    with live.client() as client:
        asked = (("OPTIONS", "/"), ("POST", "/"), ("OPTIONS", "/openapi.json"), ("POST", "/static/search.js"))
        for method, path in asked:
            response = client.request(method, path)
            assert response.status_code == 405, (method, path)
            assert response.headers["allow"] == "GET", (path, response.headers)
            assert response.json()["error"]["message"] == f"{method} {path} is not allowed; {path} takes GET"


def test_an_unknown_field_of_reindex_all_gets_the_hint(live: LiveServer) -> None:
    """The optional body's schema (anyOf) hid its fields: 'colection: Extra inputs are not permitted'."""
    with live.client(WRITE_TOKEN) as client:
        response = client.post("/api/documents/reindex-all", json={"colection": "default"})
    assert response.status_code == 422
    assert response.json()["error"]["message"] == (
        "colection: unknown field; did you mean collection? the fields are collection"
    )


def test_a_field_name_that_is_not_plain_is_quoted_and_cut_in_the_one_line(live: LiveServer) -> None:
    """The fuzz test found a key holding a newline echoed raw, so the 'one line' held two."""
    with live.client(WRITE_TOKEN) as client:
        newline = client.post("/api/documents/reindex-all", json={"\n": 1})
        long = client.post("/api/rag/retrieve", json={"query": "x", "k" * 500: 1})
    assert newline.status_code == long.status_code == 422
    assert newline.json()["error"]["message"] == "'\\n': unknown field; the fields are collection"
    message = long.json()["error"]["message"]
    assert message.startswith(f"{'k' * 59 + chr(0x2026)!r}: unknown field;") and "\n" not in message
