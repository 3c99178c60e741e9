"""``rag demo``'s answers: each preset's first result, and a degraded stage's line once."""

from __future__ import annotations

from rag_service.cli_demo import answer_lines
from rag_service.result import ChunkScores, RAGResult, RetrievalMetrics, RetrievedChunk

RERANKER_DOWN = "rerank: reranker model 'x' is not cached; set RAG_RERANK_MODEL to 'none'"


def _result(context: str, *, found: bool, degraded: list[str]) -> RAGResult:
    chunk = RetrievedChunk(
        chunk_id=1,
        document_id=1,
        source="README.md",
        content="Set   RAG_DATABASE_URL\nto your server.",
        headers={"h1": "Guide"},
        header_path="Guide",
        start_char=0,
        end_char=38,
        relevance_score=0.56,
        scores=ChunkScores(),
        collection="demo",
        chunk_type="child",
    )
    return RAGResult(
        chunks=[chunk] if found else [],
        formatted_context="" if found else "no relevant passages for 'q': the best relevance was 28%",
        total_tokens=0,
        sources=[],
        query=f"a question for {context}",
        context_type=context,
        metrics=RetrievalMetrics(degraded=degraded),
    )


def test_a_degraded_line_shows_once_where_it_first_appears() -> None:
    results = [
        _result("chatbot", found=True, degraded=[RERANKER_DOWN]),
        _result("agent", found=False, degraded=[RERANKER_DOWN, "graph: no edges yet"]),
        _result("search", found=True, degraded=[RERANKER_DOWN]),
    ]
    lines = answer_lines(results)
    assert lines.count(f"degraded: {RERANKER_DOWN}") == 1
    assert lines.index(f"degraded: {RERANKER_DOWN}") < lines.index("=== agent: a question for agent")
    assert lines.count("degraded: graph: no edges yet") == 1
    assert "top: README.md § Guide (relevance 56%)" in lines
    assert "    Set RAG_DATABASE_URL to your server." in lines
    assert "no relevant passages for 'q': the best relevance was 28%" in lines
    assert [line for line in lines if line.startswith("===")] == [
        f"=== {c}: a question for {c}" for c in ("chatbot", "agent", "search")
    ]
