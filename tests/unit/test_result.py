"""Result records: JSON-ready dicts in a stable order, embeddings kept out of them."""

from __future__ import annotations

import json

import numpy as np

from rag_service.result import (
    ChunkScores,
    RAGResult,
    RetrievalMetrics,
    RetrievedChunk,
    Source,
)


def _chunk(chunk_id: int = 7, *, embedding: np.ndarray | None = None) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id,
        document_id=3,
        source="docs/guide.md",
        content="Install with pip.",
        headers={"h1": "Guide", "h2": "Install"},
        header_path="Guide > Install",
        start_char=10,
        end_char=27,
        relevance_score=np.float32(0.5),  # type: ignore[arg-type]  # numpy scalars come from models
        scores=ChunkScores(vector=np.float64(0.8), fused=0.03),
        collection="default",
        chunk_type="child",
        title="Guide",
        embedding=embedding,
    )


def test_scores_as_dict_omits_unset_and_keeps_order() -> None:
    assert ChunkScores().as_dict() == {}
    scores = ChunkScores(rerank=2.5, vector=0.1, keyword=0.0)
    assert list(scores.as_dict().items()) == [("vector", 0.1), ("keyword", 0.0), ("rerank", 2.5)]


def test_chunk_to_dict_excludes_embedding_and_is_json_ready() -> None:
    chunk = _chunk(embedding=np.ones(4, dtype=np.float32))
    data = chunk.to_dict()
    assert "embedding" not in data
    assert list(data)[:3] == ["chunk_id", "document_id", "collection"]
    assert data["scores"] == {"vector": 0.8, "fused": 0.03}
    assert type(data["relevance_score"]) is float
    assert json.loads(json.dumps(data)) == data


def test_chunk_equality_and_repr_ignore_the_embedding() -> None:
    a = _chunk(embedding=np.ones(3))
    b = _chunk(embedding=np.zeros(3))
    assert a == b  # would raise "truth value of an array is ambiguous" if compared
    assert "embedding" not in repr(a)


def test_metrics_defaults_and_degrade() -> None:
    metrics = RetrievalMetrics()
    assert metrics.reranker == "none"
    assert metrics.degraded == []
    metrics.degrade("rerank", "model 'x' not found;\n  using fused order")
    assert metrics.degraded == ["rerank: model 'x' not found; using fused order"]
    assert RetrievalMetrics().degraded == []  # no shared default list


def _result() -> RAGResult:
    return RAGResult(
        chunks=[_chunk(1), _chunk(2)],
        formatted_context="[1] docs/guide.md — Guide\n...",
        total_tokens=12,
        sources=[Source(number=1, source="docs/guide.md", title="Guide", chunk_ids=[1, 2])],
        query="how to install",
        context_type="chatbot",
        metrics=RetrievalMetrics(total_time_ms=3.5, total_candidates=40, after_rerank=5),
    )


def test_rag_result_to_dict_stable_and_serialisable() -> None:
    data = _result().to_dict()
    assert list(data) == [
        "query",
        "context_type",
        "total_tokens",
        "chunks",
        "documents",
        "sources",
        "formatted_context",
        "metrics",
    ]
    assert data["sources"] == [{"number": 1, "source": "docs/guide.md", "title": "Guide", "chunk_ids": [1, 2]}]
    assert [c["chunk_id"] for c in data["chunks"]] == [1, 2]
    metric_keys = list(data["metrics"])
    assert metric_keys[:3] == ["embedding_time_ms", "retrieval_time_ms", "rerank_time_ms"]
    assert {"total_time_ms", "total_candidates", "after_rerank", "reranker", "degraded"} <= set(metric_keys)
    text = json.dumps(data, ensure_ascii=False)
    assert json.loads(text) == data, "plain JSON values only: nothing is lost or changed on the way"
    assert json.dumps(_result().to_dict(), ensure_ascii=False) == text  # an equal result, the same output


def test_result_json_gives_each_document_summary_once() -> None:
    chunks = []
    for chunk_id, document_id in ((1, 3), (2, 3), (3, 4), (4, 3)):
        chunk = _chunk(chunk_id)
        chunk.document_id, chunk.source = document_id, f"doc-{document_id}.md"
        chunk.summary = f"What document {document_id} is about. " * 50
        chunks.append(chunk)
    result = RAGResult(chunks, "", 0, [], "q", "chatbot", RetrievalMetrics())
    data = result.to_dict()
    assert all("summary" not in chunk for chunk in data["chunks"])
    assert [(d["document_id"], d["source"]) for d in data["documents"]] == [(3, "doc-3.md"), (4, "doc-4.md")]
    assert data["documents"][0]["summary"] == chunks[0].summary
    assert json.dumps(data).count("What document 3 is about.") == 50  # once, not once per chunk
    assert chunks[0].to_dict()["summary"] == chunks[0].summary  # a single chunk's own dict keeps it


def test_the_adapters_metadata_carries_every_line_a_result_s_json_does():
    # audit 58c: LangChain/LlamaIndex metadata had start_line/end_line but not the matched span's lines
    from rag_service.integrations.metadata import chunk_metadata

    doc = "intro\n\n## Install\nrun pip\nthen import it\n"
    chunk = RetrievedChunk(
        chunk_id=1, document_id=1, source="docs/guide.md", content=doc[7:], headers={}, header_path="",
        start_char=7, end_char=len(doc), relevance_score=0.5, scores=ChunkScores(fused=0.5), collection="c",
        chunk_type="parent", match_start=doc.index("run"), match_end=doc.index("then"),
        start_line=3, end_line=5, match_start_line=4, match_end_line=4,
    )  # fmt: skip
    data, metadata = chunk.to_dict(), chunk_metadata(chunk, citation=1)
    lines = [key for key in data if key.endswith("_line")]
    assert lines == ["start_line", "end_line", "match_start_line", "match_end_line"]
    assert {key: metadata[key] for key in lines} == {key: data[key] for key in lines}
