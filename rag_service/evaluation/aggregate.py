"""From chunk hits to a document ranking, for document-level evaluation (BEIR judges documents)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rag_service.errors import ConfigurationError

__all__ = ["rank_documents_by_best_chunk"]


def rank_documents_by_best_chunk(chunk_hits: Sequence[tuple[str, float]], *, top_k: int) -> list[tuple[str, float]]:
    """Rank documents by their best chunk's score, highest first, and keep the first ``top_k``.

    ``chunk_hits`` are ``(doc_id, score)`` pairs, one per retrieved chunk, in any order. The sort is
    stable: documents with equal scores keep the order in which their best-scoring chunk first appears.
    """
    if top_k < 1:
        raise ConfigurationError(f"top_k ({top_k}) must be at least 1")
    best: dict[str, tuple[float, int]] = {}  # doc_id -> (best score, position of its first best chunk)
    for position, (doc_id, score) in enumerate(chunk_hits):
        if math.isnan(score):
            raise ConfigurationError(f"chunk score for document {doc_id!r} is NaN; scores must be numbers")
        current = best.get(doc_id)
        if current is None or score > current[0]:
            best[doc_id] = (score, position)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1]))
    return [(doc_id, score) for doc_id, (score, _) in ranked[:top_k]]
