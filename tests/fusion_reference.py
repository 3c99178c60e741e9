"""Pure-Python reference of the hybrid statement's fusion (``rag_service.retrieve.fusion`` has the formulas).

Only tests use it: they check that the SQL of ``db/search.py`` fuses exactly like this.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rag_service.retrieve.fusion import _check_rrf_k, _ranks, check_weights


@dataclass(frozen=True, slots=True)
class FusedCandidate:
    """One chunk after fusion: its fused score and where it stood in each arm.

    Ranks are 1-based (``None`` when the arm did not return the chunk). ``rrf_fuse`` leaves the arm
    scores ``None`` (it only sees ranks); ``linear_fuse`` sets them to the raw input scores.
    """

    chunk_id: int
    score: float
    vector_rank: int | None = None
    keyword_rank: int | None = None
    vector_score: float | None = None
    keyword_score: float | None = None

    @property
    def best_rank(self) -> int:
        """The better of the two arm ranks (the first tie-breaker)."""
        ranks = [r for r in (self.vector_rank, self.keyword_rank) if r is not None]
        return min(ranks) if ranks else 0


def _ordered(candidates: Iterable[FusedCandidate]) -> list[FusedCandidate]:
    return sorted(candidates, key=lambda c: (-c.score, c.best_rank, c.chunk_id))


def rrf_fuse(
    vector_ranked: Sequence[int],
    keyword_ranked: Sequence[int],
    *,
    vector_weight: float,
    keyword_weight: float,
    rrf_k: int,
) -> list[FusedCandidate]:
    """Weighted reciprocal rank fusion of two rankings of chunk ids (best first).

    See the module docstring for the exact formula and order. A repeated id within one list keeps
    its first position. Returns every chunk of either list, best first.
    """
    vector_weight, keyword_weight = check_weights(vector_weight, keyword_weight)
    rrf_k = _check_rrf_k(rrf_k)
    v_ranks = _ranks(vector_ranked)
    k_ranks = _ranks(keyword_ranked)
    fused: list[FusedCandidate] = []
    for chunk_id in v_ranks.keys() | k_ranks.keys():
        v_rank = v_ranks.get(chunk_id)
        k_rank = k_ranks.get(chunk_id)
        v_term = vector_weight / (rrf_k + v_rank) if v_rank is not None else 0.0
        k_term = keyword_weight / (rrf_k + k_rank) if k_rank is not None else 0.0
        fused.append(FusedCandidate(chunk_id, v_term + k_term, v_rank, k_rank))
    return _ordered(fused)


def _normalised(scores: Mapping[int, float], arm: str) -> tuple[dict[int, float], dict[int, int]]:
    """Min-max normalised scores and 1-based ranks (score descending, then id) of one arm."""
    for chunk_id, score in scores.items():
        if not math.isfinite(score):
            raise ValueError(f"{arm} score of chunk {chunk_id} is {score}; scores must be finite numbers")
    if not scores:
        return {}, {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    norm = {cid: (s - low) / span if span > 0 else 1.0 for cid, s in scores.items()}
    order = sorted(scores, key=lambda cid: (-scores[cid], cid))
    return norm, {cid: rank for rank, cid in enumerate(order, start=1)}


def linear_fuse(
    vector_scores: Mapping[int, float],
    keyword_scores: Mapping[int, float],
    *,
    vector_weight: float,
    keyword_weight: float,
) -> list[FusedCandidate]:
    """Weighted sum of per-arm min-max normalised scores (higher raw score = better in both arms).

    Pass similarities, not distances. See the module docstring for the formula and order.
    """
    vector_weight, keyword_weight = check_weights(vector_weight, keyword_weight)
    v_norm, v_ranks = _normalised(vector_scores, "vector")
    k_norm, k_ranks = _normalised(keyword_scores, "keyword")
    fused: list[FusedCandidate] = []
    for chunk_id in v_norm.keys() | k_norm.keys():
        score = vector_weight * v_norm.get(chunk_id, 0.0) + keyword_weight * k_norm.get(chunk_id, 0.0)
        fused.append(
            FusedCandidate(
                chunk_id,
                score,
                v_ranks.get(chunk_id),
                k_ranks.get(chunk_id),
                vector_scores.get(chunk_id),
                keyword_scores.get(chunk_id),
            )
        )
    return _ordered(fused)
