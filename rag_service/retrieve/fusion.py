"""Hybrid fusion of a vector ranking and a keyword ranking: pure functions, no database.

Reciprocal rank fusion (``rrf_fuse``), exactly::

    score(d) = vector_weight / (rrf_k + rank_v(d)) + keyword_weight / (rrf_k + rank_k(d))

``rank_v``/``rank_k`` are 1-based positions in each arm's list (best first). A chunk missing from an
arm gets 0 from that arm (the term is left out, not given a default rank). The sum is computed in
IEEE double precision in exactly this order (vector term, then keyword term), so SQL computing
``vw / (k + rank_v) + kw / (k + rank_k)`` with ``double precision`` and ``COALESCE(term, 0)`` gives
identical values. An arm with weight 0 still contributes its chunks, with 0 from that arm.

Linear fusion (``linear_fuse``): each arm's raw scores are min-max normalised over that arm's own
candidates, ``(s - min) / (max - min)`` (all equal -> 1.0); a missing arm gives 0; the score is
``vector_weight * norm_v + keyword_weight * norm_k``.

Order, for both: score descending, then best rank over the arms ascending, then ``chunk_id``
ascending, so equal scores always come out in the same order.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rag_service.errors import ConfigurationError


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


def check_weights(vector_weight: float, keyword_weight: float) -> tuple[float, float]:
    """Both weights as floats; ``ConfigurationError`` unless finite, >= 0 and not both 0.

    Anything ``float()`` accepts except strings and booleans is taken (``Decimal`` from a NUMERIC
    column, numpy scalars).
    """
    checked: list[float] = []
    for name, value in (("vector_weight", vector_weight), ("keyword_weight", keyword_weight)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool | str | bytes) or not math.isfinite(number):
            raise ConfigurationError(f"{name} ({value!r}) must be a finite number; pass a value >= 0")
        if number < 0:
            raise ConfigurationError(f"{name} ({value}) must be >= 0; pass a value between 0 and 1")
        checked.append(number)
    if checked[0] == 0 and checked[1] == 0:
        raise ConfigurationError("vector_weight and keyword_weight are both 0; set at least one of them above 0")
    return checked[0], checked[1]


def _check_rrf_k(rrf_k: int) -> int:
    if isinstance(rrf_k, bool) or not isinstance(rrf_k, numbers.Integral) or rrf_k < 0:
        raise ConfigurationError(f"rrf_k ({rrf_k!r}) must be an integer >= 0; 60 is the usual value")
    return int(rrf_k)


def _ranks(ranked: Iterable[int]) -> dict[int, int]:
    """1-based position of each id; a repeated id keeps its first (best) position."""
    ranks: dict[int, int] = {}
    for position, chunk_id in enumerate(ranked, start=1):
        ranks.setdefault(chunk_id, position)
    return ranks


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


def max_rrf_score(vector_weight: float, keyword_weight: float, rrf_k: int) -> float:
    """The best possible ``rrf_fuse`` score (rank 1 in both arms): divide by it to get 0..1."""
    vector_weight, keyword_weight = check_weights(vector_weight, keyword_weight)
    rrf_k = _check_rrf_k(rrf_k)
    return vector_weight / (rrf_k + 1) + keyword_weight / (rrf_k + 1)


def max_linear_score(vector_weight: float, keyword_weight: float) -> float:
    """The best possible ``linear_fuse`` score (top of both arms): divide by it to get 0..1."""
    vector_weight, keyword_weight = check_weights(vector_weight, keyword_weight)
    return vector_weight + keyword_weight


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


def rrf_merge_lists(lists: Sequence[Sequence[int]], *, rrf_k: int) -> list[tuple[int, float]]:
    """Merge several rankings (e.g. one per query variant) with unweighted RRF.

    ``score(d) = sum over lists containing d of 1 / (rrf_k + rank)``, summed in list order; a
    repeated id within one list keeps its first position. Returns ``(chunk_id, score)`` best first,
    ties broken by best rank in any list, then ``chunk_id``.
    """
    rrf_k = _check_rrf_k(rrf_k)
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    for ranked in lists:
        for chunk_id, rank in _ranks(ranked).items():
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (rrf_k + rank)
            best[chunk_id] = min(rank, best.get(chunk_id, rank))
    order = sorted(scores, key=lambda cid: (-scores[cid], best[cid], cid))
    return [(chunk_id, scores[chunk_id]) for chunk_id in order]
