"""The LLM rerank's order is what reaches the caller: unrated candidates after the rated, sections in the LLM's
order, no call where reranking is off or nobody asked (a warm-up)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rag_service.service import UniversalRAGService
from tests.integration.test_llm import TEXTS, _service
from tests.llm_server import FakeLLM


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


def _reranking(db, settings, llm: FakeLLM, **changes: object) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    return _service(db, settings, llm, llm_summaries=False, llm_rerank=True, **changes)


def test_candidates_the_llm_did_not_rate_stay_after_the_rated_ones(db, settings, llm):
    """Past ``RAG_LLM_RERANK_TOP`` the candidates kept their fused scores, another scale, and the later sort by
    relevance put unrated ones above rated ones."""
    service = _reranking(db, settings, llm, llm_rerank_top=2)
    alike = [
        (f"n{i}.md", "", f"Cluster node {i} runs actor tasks for the cluster; node {i} is an actor host.")
        for i in range(8)
    ]
    service.index_texts(alike, collection="t")  # fused scores close together: the tail's above the rated ones'
    llm.relevant_word = "no passage holds this"  # every rated passage gets 0
    result = service.retrieve("cluster node actor", context="search", collection="t")
    rated = [c.scores.llm is not None for c in result.chunks]
    assert rated == sorted(rated, reverse=True) and rated.count(True) == 2, result.chunks
    relevance = [c.relevance_score for c in result.chunks]
    assert relevance == sorted(relevance, reverse=True)


def test_with_parents_the_section_the_llm_rated_best_comes_first(db, settings, llm):
    """Sections were ranked by all their children's scores summed, so a section of many children the LLM rated 0
    came before the one it rated 10."""
    long = "# Cluster\n\n## Nodes\n\n" + "\n\n".join(
        f"Cluster node {i} runs actor tasks and reports its memory to the head of the cluster." for i in range(40)
    )
    short = "# Serve\n\n## Replicas\n\nA replica is one copy of a deployment in the cluster; serve scales them."
    service = _reranking(db, settings, llm, llm_rerank_top=40)  # every candidate rated
    service.index_texts([("nodes.md", "", long), ("serve.md", "", short)], collection="p", strategy="markdown")
    result = service.retrieve("cluster node actor", context="workflow", collection="p", max_chunks=2)
    assert "replica" in result.chunks[0].content.lower(), [c.source for c in result.chunks]
    assert result.chunks[0].scores.llm == 1.0


def test_no_llm_call_where_reranking_is_off_or_for_the_warm_up(db, settings, llm):
    service = _reranking(db, settings, llm)
    service.index_texts(TEXTS, collection="t")
    off = service.retrieve("cluster node actor", context="search", collection="t", rerank_enabled=False)
    assert llm.requests == [] and off.metrics.reranker == "none" and off.metrics.llm_time_ms == 0
    assert service.warm_up("search") is None and llm.requests == []  # readiness waited for two LLM calls
    service.retrieve("cluster node actor", context="search", collection="t")
    assert len(llm.requests) == 1
