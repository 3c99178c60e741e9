"""Fusion arithmetic the retriever needs: score maxima and the RRF merge of query variants.

The hybrid statement fuses its two arms in SQL (``db/search.py``); the pure-Python reference of that
fusion, which the tests compare the SQL with, lives in ``tests/fusion_reference.py``. The formulas:

Reciprocal rank fusion, exactly::

    score(d) = vector_weight / (rrf_k + rank_v(d)) + keyword_weight / (rrf_k + rank_k(d))

``rank_v``/``rank_k`` are 1-based positions in each arm's list (best first). A chunk missing from an
arm gets 0 from that arm (the term is left out, not given a default rank). The sum is computed in
IEEE double precision in exactly this order (vector term, then keyword term), so SQL computing
``vw / (k + rank_v) + kw / (k + rank_k)`` with ``double precision`` and ``COALESCE(term, 0)`` gives
identical values. An arm with weight 0 still contributes its chunks, with 0 from that arm.

Linear fusion: each arm's raw scores are min-max normalised over that arm's own
candidates, ``(s - min) / (max - min)`` (all equal -> 1.0); a missing arm gives 0; the score is
``vector_weight * norm_v + keyword_weight * norm_k``.

Order, for both: score descending, then best rank over the arms ascending, then ``chunk_id``
ascending, so equal scores always come out in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from rag_service.errors import ConfigurationError
from rag_service.knobs import PRESET_KNOBS


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
        problem = PRESET_KNOBS[name].problem(number)
        if problem is not None:
            raise ConfigurationError(problem)
        checked.append(number)
    if checked[0] == 0 and checked[1] == 0:
        raise ConfigurationError("vector_weight and keyword_weight are both 0; set at least one of them above 0")
    return checked[0], checked[1]


def _check_rrf_k(rrf_k: int) -> int:
    problem = PRESET_KNOBS["rrf_k"].problem(rrf_k)
    if problem is not None:
        raise ConfigurationError(problem)
    return int(rrf_k)


def _ranks(ranked: Iterable[int]) -> dict[int, int]:
    """1-based position of each id; a repeated id keeps its first (best) position."""
    ranks: dict[int, int] = {}
    for position, chunk_id in enumerate(ranked, start=1):
        ranks.setdefault(chunk_id, position)
    return ranks


def max_rrf_score(vector_weight: float, keyword_weight: float, rrf_k: int) -> float:
    """The best possible RRF score (rank 1 in both arms): divide by it to get 0..1."""
    vector_weight, keyword_weight = check_weights(vector_weight, keyword_weight)
    rrf_k = _check_rrf_k(rrf_k)
    return vector_weight / (rrf_k + 1) + keyword_weight / (rrf_k + 1)


def max_linear_score(vector_weight: float, keyword_weight: float) -> float:
    """The best possible linear score (top of both arms): divide by it to get 0..1."""
    vector_weight, keyword_weight = check_weights(vector_weight, keyword_weight)
    return vector_weight + keyword_weight


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
