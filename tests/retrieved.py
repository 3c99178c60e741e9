"""A ``RetrievedChunk`` that is a span of a document's text, for the tests of the stages after the search."""

from __future__ import annotations

from typing import Any

from rag_service.result import ChunkScores, RetrievedChunk


def span_chunk(
    doc: str, start: int, end: int, *, chunk_id: int = 1, relevance: float = 0.5, **fields: Any
) -> RetrievedChunk:
    """``doc[start:end]`` as a child of ``doc.md`` in collection ``c`` (``fields`` replace any other value)."""
    values: dict[str, Any] = {
        "chunk_id": chunk_id,
        "document_id": 1,
        "source": "doc.md",
        "content": doc[start:end],
        "headers": {},
        "header_path": "",
        "start_char": start,
        "end_char": end,
        "relevance_score": relevance,
        "scores": ChunkScores(fused=relevance),
        "collection": "c",
        "chunk_type": "child",
    }
    return RetrievedChunk(**{**values, **fields})
