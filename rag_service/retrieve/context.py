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

#: the scores ``add_context`` adds, in the order of its weights
SIGNALS = ("context", "proximity", "context_similarity")


def context_applies(weight: float, vector_weight: float) -> bool:
    """Whether a search computes the context BM25: with a weight, and with both arms (added to the BM25 arm
    alone it gained on SciFact and lost 0.015 nDCG@10 on anthropic-docs-qa: docs/benchmarks.md)."""
    return weight > 0 and vector_weight > 0


def add_context(chunks: Sequence[RetrievedChunk], weights: tuple[float, ...]) -> list[RetrievedChunk]:
    """``chunks`` re-ranked by ``(relevance + sum of w * signal) / (1 + sum of w)``, ties in their order.

    ``weights`` are those of each one's context BM25 (``scores.context``), term proximity (``scores.proximity``)
    and context similarity (``scores.context_similarity``), in that order (``Settings.context_weights``); each
    signal is min-max normalised over ``chunks``, and one without a value counts its own relevance there, so it
    keeps its relevance. A signal with weight 0, or that no chunk has, is left out; with none, the chunks are
    returned unchanged.
    """
    signals = [
        (w, _normalised([getattr(c.scores, name) for c in chunks]))
        for name, w in zip(SIGNALS, weights, strict=False)
        if w > 0 and any(getattr(c.scores, name) is not None for c in chunks)
    ]
    if not signals:
        return list(chunks)
    total = 1 + sum(w for w, _ in signals)

    def relevance(i: int, chunk: RetrievedChunk) -> float:
        value = chunk.relevance_score
        for w, normalised in signals:
            own = normalised[i]
            value += w * (chunk.relevance_score if own is None else own)
        return value / total

    rescored = [replace(c, relevance_score=relevance(i, c)) for i, c in enumerate(chunks)]
    return [rescored[i] for i in sorted(range(len(rescored)), key=lambda i: (-rescored[i].relevance_score, i))]


def _normalised(values: list[float | None]) -> list[float | None]:
    """``values`` min-max normalised over those set (all 1.0 when they are equal); None stays None."""
    known = [v for v in values if v is not None]
    lo, span = min(known), max(known) - min(known)
    return [None if v is None else (v - lo) / span if span > 0 else 1.0 for v in values]
