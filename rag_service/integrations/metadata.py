"""The metadata every adapter attaches to a retrieved chunk: one definition, no framework imports."""

from __future__ import annotations

import warnings
from typing import Any

from rag_service.result import RAGResult, RetrievedChunk


class RetrievalDegradedWarning(RuntimeWarning):
    """A retrieval stage (reranking, expansion, a replica, ...) did not run as configured; see the message."""


#: metadata keys an LLM should read next to the text (the rest is for code: offsets, scores, ids)
LLM_METADATA_KEYS = ("source", "title", "header_path", "citation")


def chunk_metadata(chunk: RetrievedChunk, *, citation: int | None, degraded: list[str] | None = None) -> dict[str, Any]:
    """Where ``chunk`` comes from and how it scored, JSON-ready.

    ``start_char``/``end_char`` are offsets into the source document's text, ``match_start``/
    ``match_end`` the span that matched the query, ``start_line``/``end_line`` the span's 1-based lines and
    ``match_start_line``/``match_end_line`` the matched span's (None when unknown: a PDF, a chunk stored before
    lines were); ``relevance_score`` is in 0..1; ``citation`` is
    the ``[n]`` of the chunk's source in the result's formatted context (None when the token budget
    left the chunk out of it); ``keywords`` and ``summary`` are the chunk's and its document's (issue 17);
    ``degraded`` is the call's ``metrics.degraded`` (empty when every stage ran as configured).
    """
    return {
        "source": chunk.source,
        "title": chunk.title,
        "collection": chunk.collection,
        "document_id": int(chunk.document_id),
        "chunk_id": int(chunk.chunk_id),
        "chunk_type": chunk.chunk_type,
        "is_parent": chunk.is_parent,
        "headers": dict(chunk.headers),
        "header_path": chunk.header_path,
        "start_char": int(chunk.start_char),
        "end_char": int(chunk.end_char),
        "match_start": int(chunk.match_start),
        "match_end": int(chunk.match_end),
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "match_start_line": chunk.match_start_line,
        "match_end_line": chunk.match_end_line,
        "relevance_score": float(chunk.relevance_score),
        "scores": chunk.scores.as_dict(),
        "keywords": list(chunk.metadata.get("keywords", [])),
        "summary": chunk.summary,
        "citation": citation,
        "degraded": list(degraded or []),
    }


def result_metadata(result: RAGResult) -> list[tuple[RetrievedChunk, dict[str, Any]]]:
    """Each chunk of ``result`` with its metadata, most relevant first (citations from ``result.sources``).

    ``result.chunks`` follows the formatted context (grouped by source); retrievers hand out a ranking.
    A degraded call also raises a ``RetrievalDegradedWarning`` naming the stages (one per call, with
    the default warning filters once per message): a framework user sees it without reading metadata.
    """
    degraded = list(result.metrics.degraded)
    if degraded:
        warnings.warn(f"rag_service retrieval degraded: {'; '.join(degraded)}", RetrievalDegradedWarning, stacklevel=3)
    numbers = {chunk_id: source.number for source in result.sources for chunk_id in source.chunk_ids}
    ranked = sorted(result.chunks, key=lambda chunk: -chunk.relevance_score)
    return [(chunk, chunk_metadata(chunk, citation=numbers.get(chunk.chunk_id), degraded=degraded)) for chunk in ranked]
