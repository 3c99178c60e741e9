"""What ``rag eval`` reports about reranking is what ran, not what was asked for; its queries' bar."""

from __future__ import annotations

import pytest

from rag_service.evaluation.runner import EvalConfig, EvalResult, each_query


def _result(*, rerank: bool, reranker: str) -> EvalResult:
    return EvalResult(
        dataset="ev",
        split="test",
        collection="docs-ev",
        config=EvalConfig(rerank=rerank),
        metrics={"ndcg@10": 1.0},
        per_query={},
        latency={},
        run={},
        queries=1,
        reranker=reranker,
        degraded=[],
    )


def test_rerank_is_off_when_no_reranker_ran() -> None:
    none = _result(rerank=True, reranker="none")  # RAG_RERANK_MODEL=none
    assert none.to_dict()["config"]["rerank"] is False and none.to_dict()["reranker"] == "none"
    assert none.lines()[0].endswith("context search, rerank off (no reranker ran)")
    ran = _result(rerank=True, reranker="ms-marco-MiniLM-L-6-v2")
    assert ran.to_dict()["config"]["rerank"] is True
    assert ran.lines()[0].endswith("rerank on (ms-marco-MiniLM-L-6-v2)")
    skipped = _result(rerank=False, reranker="none")  # --no-rerank
    assert skipped.to_dict()["config"]["rerank"] is False and skipped.lines()[0].endswith("rerank off")


def test_the_queries_bar_stays_off_a_stderr_that_is_no_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    # `rag eval ... 2>log` filled the log with the bar's carriage-return redraws
    queries = {f"q{i}": f"question {i}" for i in range(50)}
    assert list(each_query(queries, progress=True)) == list(queries.items())
    assert capsys.readouterr().err == ""
