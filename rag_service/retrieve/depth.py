"""Candidates read deeper when identical texts left fewer distinct ones than the results asked for.

The search reads ``max(candidate_k, max_chunks)`` fused rows per query variant, and ``dedupe`` keeps one row of
each text: a collection whose documents share boilerplate (a licence paragraph, a footer) returned 2 of 12
results while many more distinct matches went unread. Each round doubles the depth (or grows it by the share of
distinct rows, if more), up to pgvector's limit, and stops once no variant filled its rows (none are left).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from rag_service.db.search import SearchHit, SearchRequest
from rag_service.knobs import MAX_CANDIDATE_K, MAX_EF_SEARCH


def deeper(
    requests: Sequence[SearchRequest], per_variant: Sequence[Sequence[SearchHit]], distinct: int, wanted: int
) -> list[SearchRequest] | None:
    """The requests again, reading deeper, when their rows held ``distinct`` texts of the ``wanted``; else None."""
    if distinct >= wanted or all(r.limit >= MAX_CANDIDATE_K for r in requests):
        return None
    if not any(len(hits) >= r.limit for r, hits in zip(requests, per_variant, strict=True)):
        return None  # every variant read all its rows: there are no more
    return [_grown(r, wanted / max(distinct, 1)) for r in requests]


def _grown(request: SearchRequest, share: float) -> SearchRequest:
    depth = min(MAX_CANDIDATE_K, max(2 * request.limit, math.ceil(request.limit * share)))
    return replace(request, candidate_k=depth, limit=depth, ef_search=min(MAX_EF_SEARCH, max(request.ef_search, depth)))
