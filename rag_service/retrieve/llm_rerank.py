"""Reranking by an LLM with NeuroLink's multi-factor score (``RAG_LLM_RERANK``).

The top ``top`` candidates are rated by the LLM in one call (0-10 each, ``llm.rate_passages``) and
re-ordered by ``semantic * rating + vector * cosine + position * (1 - i / n)``, where ``i`` is the
candidate's place in the incoming ranking; the three weights (``RAG_LLM_RERANK_WEIGHTS``) sum to 1 and
are validated with the settings. Candidates below ``top`` keep their order after them. The score
becomes ``relevance_score`` and the rating ``scores.llm``. An ``LLMError`` is the caller's to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rag_service.llm import ChatModel, rate_passages
from rag_service.result import RetrievedChunk


def multi_factor_score(
    rating: float, vector: float | None, position: int, count: int, weights: Sequence[float]
) -> float:
    """NeuroLink's score of one candidate: weighted LLM rating, cosine similarity and rank position, in 0..1."""
    semantic_w, vector_w, position_w = weights
    cosine = min(max(vector or 0.0, 0.0), 1.0)
    place = 1.0 - position / count if count > 0 else 0.0
    return semantic_w * rating + vector_w * cosine + position_w * place


def llm_rerank(
    query: str, chunks: Sequence[RetrievedChunk], model: ChatModel, *, weights: Sequence[float], top: int
) -> list[RetrievedChunk]:
    """``chunks`` with the first ``top`` re-ordered by the multi-factor score (see the module doc)."""
    head, tail = list(chunks[:top]), list(chunks[top:])
    if not head:
        return list(chunks)
    ratings = rate_passages(model, query, [_passage(c) for c in head])
    rescored = [
        replace(
            chunk,
            scores=replace(chunk.scores, llm=rating),
            relevance_score=multi_factor_score(rating, chunk.scores.vector, i, len(head), weights),
        )
        for i, (chunk, rating) in enumerate(zip(head, ratings, strict=True))
    ]
    order = sorted(range(len(rescored)), key=lambda i: (-rescored[i].relevance_score, i))
    return [rescored[i] for i in order] + _below(tail, min(c.relevance_score for c in rescored))


def _below(tail: Sequence[RetrievedChunk], lowest: float) -> list[RetrievedChunk]:
    """The unrated candidates in their order, their relevance scaled under the lowest rated one's: on their own
    scale (fused) they were mixed with the rated ones by every later sort, and could rank above them."""
    top = max((c.relevance_score for c in tail), default=0.0)
    scale = 0.99 * lowest / top if top > 0 else 0.0
    return [replace(c, relevance_score=c.relevance_score * scale) for c in tail]


def _passage(chunk: RetrievedChunk) -> str:
    return f"{chunk.header_path}\n{chunk.content}" if chunk.header_path else chunk.content
