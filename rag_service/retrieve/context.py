"""The context BM25 after fusion: each result's section (or document) scored as one BM25 document.

The fused ranking scores chunks; a section holding every word of a question spread over several of its
chunks ranks no higher for it. Each candidate carries its context's BM25 (``SearchHit.context_score``,
``rag_service.db.contexts``); here it is min-max normalised over the candidates and added with
``weight`` to the relevance: to each chunk's fused relevance when results are chunks, to each section's
(after the noisy-OR of its children) when they are sections. Relevance stays in 0..1 (divided by
``1 + weight``). With both arms only (alone, the BM25 arm lost on anthropic-docs-qa). On the visible
sets: SciFact +0.015, anthropic-docs-qa +0.030, ray-docs-qa +0.001 nDCG@10 (docs/benchmarks.md, "Session 14").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rag_service.result import RetrievedChunk


def context_applies(weight: float, vector_weight: float) -> bool:
    """Whether a search computes the context BM25: with a weight, and with both arms (added to the BM25 arm
    alone it gained on SciFact and lost 0.015 nDCG@10 on anthropic-docs-qa: docs/benchmarks.md)."""
    return weight > 0 and vector_weight > 0


def add_context(chunks: Sequence[RetrievedChunk], weight: float) -> list[RetrievedChunk]:
    """``chunks`` re-ranked by ``(relevance + weight * context) / (1 + weight)``, ties in their order.

    ``context`` is each one's ``scores.context`` min-max normalised over ``chunks``; one without a stored
    context (``scores.context`` None) counts its own relevance there, so it keeps its relevance. Unchanged
    when ``weight`` is 0 or no chunk has a context score.
    """
    known = [c.scores.context for c in chunks if c.scores.context is not None]
    if weight <= 0 or not known:
        return list(chunks)
    lo, span = min(known), max(known) - min(known)

    def context(chunk: RetrievedChunk) -> float:
        value = chunk.scores.context
        if value is None:
            return chunk.relevance_score
        return (value - lo) / span if span > 0 else 1.0

    rescored = [replace(c, relevance_score=(c.relevance_score + weight * context(c)) / (1 + weight)) for c in chunks]
    return [rescored[i] for i in sorted(range(len(rescored)), key=lambda i: (-rescored[i].relevance_score, i))]
