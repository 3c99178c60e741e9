"""The optional LLM endpoint (issue 17 point 4) against a real local HTTP server speaking its API."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from rag_service.config import Settings, load_settings
from rag_service.embed import HashingEmbedder
from rag_service.errors import ConfigurationError
from rag_service.ingest.report import IngestReport
from rag_service.ingest.summary import MAX_SUMMARY_CHARS
from rag_service.retrieve.llm_rerank import multi_factor_score
from rag_service.service import UniversalRAGService
from tests.llm_server import FakeLLM

TEXTS = [
    ("serve.md", "Serve", "Serve scales each deployment's replica count with traffic. A replica is an actor."),
    ("nodes.md", "Nodes", "Worker nodes join the cluster and run tasks. Nodes report their memory to the head."),
    ("jobs.md", "Jobs", "Jobs are submitted to the cluster with the job CLI. Each job gets its own driver process."),
    ("logs.md", "Logs", "Logs of each worker go to the session folder of the node. Rotate them by size."),
    ("dash.md", "Dashboard", "The dashboard shows every node, actor and replica of the cluster in a browser."),
]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


def _service(db, settings: Settings, llm: FakeLLM | None, **changes: object) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    if llm is not None:
        changes = {"llm_base_url": llm.base_url, "llm_model": "fake-model", "llm_timeout_s": 0.5, **changes}
    settings = dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
    return UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)


def _summaries(connection) -> dict[str, tuple[str, str]]:  # type: ignore[no-untyped-def]
    rows = connection.execute(
        text("SELECT source, metadata->>'summary', metadata->>'summary_source' FROM documents WHERE collection='t'")
    )
    return {row[0]: (row[1], row[2]) for row in rows}


def test_the_llm_writes_summaries_at_ingestion(db, settings, llm, connection):
    service = _service(db, settings, llm, llm_api_key="sk-test")
    report = service.index_texts(TEXTS, collection="t")
    assert report.ok and report.degraded == []
    summaries = _summaries(connection)
    assert summaries["serve.md"] == ("LLM summary: Serve scales each deployment's replica count", "llm:fake-model")
    assert len(llm.requests) == len(TEXTS) and set(llm.auth) == {"Bearer sk-test"}
    assert llm.requests[0]["model"] == "fake-model"


@pytest.mark.parametrize("mode", ["error", "slow"])
def test_a_failing_llm_degrades_ingestion_to_extractive_summaries(db, settings, llm, connection, mode):
    llm.mode = mode
    report = _service(db, settings, llm).index_texts(TEXTS, collection="t")
    assert report.ok and report.added == len(TEXTS), "ingestion never fails for the LLM"
    assert len(report.degraded) == 1 and report.degraded[0].startswith("summary: the LLM failed for 3 document(s)")
    reason = "answered HTTP 500" if mode == "error" else "did not answer within 0.5 s (RAG_LLM_TIMEOUT_S)"
    assert reason in report.degraded[0] and f"not asked for {len(TEXTS) - 3} more" in report.degraded[0]
    assert f"degraded: {report.degraded[0]}" in report.lines()
    assert len(llm.requests) == 3, "after three failures in a row the run stops asking"
    assert {source for _, source in _summaries(connection).values()} == {"extractive"}


def test_a_run_that_failed_for_its_last_documents_does_not_say_it_stopped_asking(db, settings, llm):
    """"was not asked again" was said after the third failure in a row also when no document was left to ask."""
    llm.mode = "error"
    report = _service(db, settings, llm).index_texts(TEXTS[:3], collection="t")
    assert report.degraded[0].startswith("summary: the LLM failed for 3 document(s); "), report.degraded


@pytest.mark.parametrize(
    "answer", ["A summary with a NUL \x00 inside.", "A summary with a lone surrogate \ud800 inside."]
)
def test_an_llm_summary_postgresql_cannot_store_is_cleaned_and_the_document_indexed(
    db, settings, llm, connection, answer
):
    service = _service(db, settings, llm)
    service.index_texts(TEXTS[:1], collection="t")
    llm.summary = answer  # valid JSON escapes (\u0000, \ud800) that jsonb refuses
    edited = (TEXTS[0][0], TEXTS[0][1], TEXTS[0][2] + " An edit.")
    report = service.index_texts([edited, TEXTS[1]], collection="t")
    assert report.ok and (report.updated, report.added) == (1, 1) and report.degraded == []
    summaries = _summaries(connection)
    cleaned = " ".join(answer.replace("\x00", "").replace("\ud800", "").split())
    assert summaries["serve.md"] == summaries["nodes.md"] == (cleaned, "llm:fake-model")
    stored = connection.execute(text("SELECT content FROM documents WHERE collection='t' AND source='serve.md'"))
    assert stored.scalar_one() == edited[2], "the edit is applied"


def test_an_llm_summary_is_cut_at_a_word_edge_like_an_extractive_one(db, settings, llm, connection):
    llm.summary = "Sentence one is long. " * 20_000  # 440 kB (under the 1 MB read): an endpoint ignoring max_tokens
    report = _service(db, settings, llm).index_texts(TEXTS[:1], collection="t")
    assert report.ok and report.degraded == []
    summary, source = _summaries(connection)["serve.md"]
    assert len(summary) <= MAX_SUMMARY_CHARS + 2 and summary.endswith("long. …") and source == "llm:fake-model"


def test_metadata_build_asks_the_llm_outside_any_transaction_and_keeps_a_text_changed_meanwhile(
    fresh_database, settings, llm
):
    service = _service(fresh_database, settings, llm)
    service.index_texts(TEXTS[:3], collection="t")
    waiting: list[str] = []

    def during_the_call(body: dict[str, Any]) -> None:  # another session, while the run waits on the LLM
        with fresh_database.transaction() as session:
            waiting.extend(session.execute(_IDLE_IN_TRANSACTION).scalars())
            if body["messages"][1]["content"].startswith("Jobs are"):
                session.execute(_CHANGE_JOBS)

    llm.summary, llm.on_request = "A new summary.", during_the_call
    report = service.build_metadata(collection="t")
    assert waiting == [], "no transaction is open while the LLM is asked"
    with fresh_database.transaction() as session:
        summaries = _summaries(session)
    assert summaries["serve.md"] == summaries["nodes.md"] == ("A new summary.", "llm:fake-model")
    assert summaries["jobs.md"][0].startswith("LLM summary: Jobs are"), "not the old text's summary for the new text"
    assert (report.documents, report.summaries) == (3, 2)


_CHANGE_JOBS = text("UPDATE documents SET content = 'Jobs changed.', content_hash = 'changed' WHERE source = 'jobs.md'")
_IDLE_IN_TRANSACTION = text(
    "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND state LIKE 'idle in transaction%'"
)


def test_a_rechunk_of_unchanged_text_keeps_its_llm_summary_without_asking(db, settings, llm, connection):
    service = _service(db, settings, llm)
    service.index_texts(TEXTS, collection="t")
    before, llm.summary = _summaries(connection), "A summary asked again."
    llm.requests.clear()
    assert service.index_texts(TEXTS, collection="t", force=True).updated == len(TEXTS)
    assert _service(db, settings, llm, chunk_size=300).index_texts(TEXTS, collection="t").updated == len(TEXTS)
    assert service.reindex_all(collection="t").ok
    assert _service(db, settings, None).index_texts(TEXTS, collection="t", force=True).ok, "also with no LLM"
    assert llm.requests == [] and _summaries(connection) == before


@pytest.mark.parametrize("via", ["texts", "paths"])
def test_a_summary_the_llm_failed_is_asked_again_and_a_stored_one_is_kept_on_failure(
    db, settings, llm, connection, tmp_path, monkeypatch, via
):
    monkeypatch.chdir(tmp_path)
    for source, _, body in TEXTS:
        (tmp_path / source).write_text(body)
    service = _service(db, settings, llm)

    def ingest() -> IngestReport:
        if via == "texts":
            return service.index_texts(TEXTS, collection="t")
        return service.index_paths([tmp_path], collection="t")

    llm.mode = "error"
    report = ingest()
    assert report.ok and "5 document(s) got extractive summaries; the LLM is asked again" in report.degraded[0]
    assert connection.execute(_MARKED).scalar_one() == len(TEXTS)
    llm.mode, llm.requests = "ok", []
    report = ingest()
    assert report.unchanged == len(TEXTS) and report.degraded == [] and len(llm.requests) == len(TEXTS)
    assert {s for _, s in _summaries(connection).values()} == {"llm:fake-model"}
    assert connection.execute(_MARKED).scalar_one() == 0
    llm.requests = []
    assert ingest().unchanged == len(TEXTS) and llm.requests == [], "asked again once"

    before, llm.mode = _summaries(connection), "error"
    report = service.build_metadata(collection="t")
    assert _summaries(connection) == before, "rag metadata build keeps a stored LLM summary the LLM fails to renew"
    assert "5 kept their stored LLM summary" in report.degraded[0]


_MARKED = text("SELECT count(*) FROM documents WHERE collection = 't' AND metadata->'summary_retry' = 'true'")


def test_llm_rerank_orders_by_the_multi_factor_score(db, settings, llm):
    service = _service(db, settings, llm, llm_summaries=False, llm_rerank=True, llm_rerank_top=4)
    service.index_texts(TEXTS, collection="t")
    plain = _service(db, settings, None).retrieve("cluster node actor", context="search", collection="t")
    result = service.retrieve("cluster node actor", context="search", collection="t")
    m = result.metrics
    assert m.degraded == [] and m.reranker == "llm:fake-model" and m.llm_time_ms > 0
    head = [c.chunk_id for c in plain.chunks][:4]
    by_id = {c.chunk_id: c for c in plain.chunks}
    expected = sorted(
        range(len(head)),
        key=lambda i: (
            -multi_factor_score(
                1.0 if "replica" in by_id[head[i]].content.lower() else 0.0,
                by_id[head[i]].scores.vector,
                i,
                len(head),
                (0.5, 0.3, 0.2),
            ),
            i,
        ),
    )
    reranked = [c for c in result.chunks if c.chunk_id in head]
    assert [c.chunk_id for c in reranked] == [head[i] for i in expected]
    assert reranked[0].scores.llm == 1.0 and "replica" in reranked[0].content.lower()
    assert reranked[0].to_dict()["scores"]["llm"] == 1.0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("slow", "did not answer within 0.5 s"),
        ("error", "answered HTTP 500"),
        ("nonsense", "not a JSON array of"),
    ],
)
def test_a_failing_llm_degrades_the_rerank_never_the_call(db, settings, llm, mode, reason):
    service = _service(db, settings, llm, llm_summaries=False, llm_rerank=True)
    service.index_texts(TEXTS, collection="t")
    plain = _service(db, settings, None).retrieve("cluster node actor", context="search", collection="t")
    llm.mode = mode
    result = service.retrieve("cluster node actor", context="search", collection="t")
    assert [c.chunk_id for c in result.chunks] == [c.chunk_id for c in plain.chunks], "the fused order stands"
    assert len(result.metrics.degraded) == 1 and result.metrics.degraded[0].startswith("llm_rerank: ")
    assert reason in result.metrics.degraded[0] and result.metrics.reranker == "none"


def test_no_llm_configured_means_no_call_and_no_import(db, settings, llm):
    service = _service(db, settings, None)  # RAG_LLM_RERANK=true without a URL is refused (test_llm_settings.py)
    service.index_texts(TEXTS, collection="t")
    assert service.retrieve("replica", context="search", collection="t").metrics.degraded == []
    assert service.chat_model() is None and llm.requests == []
    code = (
        "import sys; from rag_service.service import UniversalRAGService; import rag_service.cli; "
        "assert 'httpx' not in sys.modules and 'openai' not in sys.modules, sorted(sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0


def test_rerank_weights_are_validated_once_with_the_settings(monkeypatch):
    monkeypatch.setenv("RAG_LLM_RERANK_WEIGHTS", "0.6,0.6,0.1")
    with pytest.raises(ConfigurationError, match=r"RAG_LLM_RERANK_WEIGHTS: .*summing to 1, e\.g\. 0\.5,0\.3,0\.2"):
        load_settings()
    monkeypatch.setenv("RAG_LLM_RERANK_WEIGHTS", "0.2,0.2,0.6")
    assert load_settings().llm_rerank_weights == "0.2,0.2,0.6"
    monkeypatch.setenv("RAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="RAG_LLM_MODEL is not"):
        load_settings()
