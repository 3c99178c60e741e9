"""Fusion arithmetic on hand-worked examples, weights, normalisation and deterministic ties."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_service.errors import ConfigurationError
from rag_service.retrieve.fusion import max_linear_score, max_rrf_score, rrf_merge_lists
from tests.fusion_reference import FusedCandidate, linear_fuse, rrf_fuse


def test_rrf_hand_example() -> None:
    fused = rrf_fuse([10, 20, 30], [30, 10, 40], vector_weight=0.7, keyword_weight=0.3, rrf_k=60)
    by_id = {c.chunk_id: c for c in fused}
    assert by_id[10].score == 0.7 / 61 + 0.3 / 62
    assert by_id[20].score == 0.7 / 62 + 0.0
    assert by_id[30].score == 0.7 / 63 + 0.3 / 61
    assert by_id[40].score == 0.0 + 0.3 / 63
    assert [c.chunk_id for c in fused] == [10, 30, 20, 40]
    assert by_id[30] == FusedCandidate(30, 0.7 / 63 + 0.3 / 61, vector_rank=3, keyword_rank=1)
    assert by_id[40].vector_rank is None and by_id[40].keyword_rank == 3
    assert by_id[20].vector_score is None and by_id[20].keyword_score is None


def test_rrf_absent_arm_contributes_zero() -> None:
    fused = rrf_fuse([1], [], vector_weight=1.0, keyword_weight=1.0, rrf_k=60)
    assert fused == [FusedCandidate(1, 1 / 61, vector_rank=1, keyword_rank=None)]
    assert rrf_fuse([], [], vector_weight=1.0, keyword_weight=1.0, rrf_k=60) == []


def test_rrf_zero_weight_arm_keeps_its_chunks_with_zero_from_it() -> None:
    fused = rrf_fuse([1, 2], [3, 2], vector_weight=1.0, keyword_weight=0.0, rrf_k=60)
    assert [(c.chunk_id, c.score) for c in fused] == [(1, 1 / 61), (2, 1 / 62), (3, 0.0)]


def test_rrf_ties_break_by_best_rank_then_id() -> None:
    # k=1 (the smallest rrf_k, knobs.py): rank 3 in both arms (1/4 + 1/4) ties exactly with rank 1 in one (1/2)
    fused = rrf_fuse([7, 8, 1], [9, 10, 1], vector_weight=1.0, keyword_weight=1.0, rrf_k=1)
    assert [c.chunk_id for c in fused][:3] == [7, 9, 1]
    assert fused[0].score == fused[1].score == fused[2].score == 0.5
    # same score and same best rank: the smaller id first, whatever the input order
    swapped = rrf_fuse([2, 1], [1, 2], vector_weight=1.0, keyword_weight=1.0, rrf_k=60)
    assert [c.chunk_id for c in swapped] == [1, 2]


def test_rrf_repeated_id_keeps_first_position() -> None:
    fused = rrf_fuse([5, 6, 5], [], vector_weight=1.0, keyword_weight=1.0, rrf_k=60)
    assert [(c.chunk_id, c.vector_rank) for c in fused] == [(5, 1), (6, 2)]


def test_max_rrf_score_is_reached_by_rank_one_in_both_arms() -> None:
    fused = rrf_fuse([4, 5], [4, 6], vector_weight=0.6, keyword_weight=0.4, rrf_k=60)
    best = max_rrf_score(0.6, 0.4, 60)
    assert best == 0.6 / 61 + 0.4 / 61
    assert fused[0].chunk_id == 4 and fused[0].score / best == 1.0
    assert all(0.0 <= c.score / best <= 1.0 for c in fused)


@pytest.mark.parametrize(
    ("vector_weight", "keyword_weight", "fragment"),
    [
        (0.0, 0.0, "both 0"),
        (-0.1, 1.0, "vector_weight (-0.1) must be between 0 and 1"),
        (1.0, math.nan, "keyword_weight (nan) must be a finite number"),
        (True, 1.0, "vector_weight (True)"),
        ("0.5", 1.0, "vector_weight ('0.5')"),
    ],
)
def test_invalid_weights_raise(vector_weight: float, keyword_weight: float, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        rrf_fuse([1], [2], vector_weight=vector_weight, keyword_weight=keyword_weight, rrf_k=60)
    with pytest.raises(ConfigurationError):
        linear_fuse({1: 1.0}, {}, vector_weight=vector_weight, keyword_weight=keyword_weight)


@pytest.mark.parametrize("rrf_k", [-1, 1.5, True, None])
def test_invalid_rrf_k_raises(rrf_k: object) -> None:
    with pytest.raises(ConfigurationError, match="rrf_k"):
        rrf_fuse([1], [1], vector_weight=1.0, keyword_weight=1.0, rrf_k=rrf_k)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="rrf_k"):
        rrf_merge_lists([[1]], rrf_k=rrf_k)  # type: ignore[arg-type]


def test_decimal_weights_from_numeric_columns_are_accepted() -> None:
    fused = rrf_fuse([1], [1], vector_weight=Decimal("0.7"), keyword_weight=Decimal("0.3"), rrf_k=60)  # type: ignore[arg-type]
    assert fused[0].score == 0.7 / 61 + 0.3 / 61


def test_linear_normalises_each_arm() -> None:
    fused = linear_fuse(
        {1: 0.9, 2: 0.5, 3: 0.1},
        {3: 12.0, 4: 2.0},
        vector_weight=0.5,
        keyword_weight=0.5,
    )
    by_id = {c.chunk_id: c for c in fused}
    assert by_id[1].score == 0.5 * 1.0 + 0.5 * 0.0
    assert by_id[2].score == pytest.approx(0.5 * 0.5)
    assert by_id[3].score == 0.5 * 0.0 + 0.5 * 1.0
    assert by_id[4].score == 0.0
    assert [c.chunk_id for c in fused] == [1, 3, 2, 4]  # 1 and 3 tie at 0.5: both best rank 1, id
    assert (by_id[3].vector_rank, by_id[3].keyword_rank) == (3, 1)
    assert (by_id[3].vector_score, by_id[3].keyword_score) == (0.1, 12.0)
    assert by_id[4].vector_score is None


def test_linear_all_equal_scores_normalise_to_one() -> None:
    fused = linear_fuse({1: 0.3, 2: 0.3}, {}, vector_weight=0.8, keyword_weight=0.2)
    assert [(c.chunk_id, c.score) for c in fused] == [(1, 0.8), (2, 0.8)]
    assert [c.vector_rank for c in fused] == [1, 2]
    assert max_linear_score(0.8, 0.2) == 1.0


def test_linear_rejects_non_finite_scores() -> None:
    with pytest.raises(ValueError, match="keyword score of chunk 2 is nan"):
        linear_fuse({}, {2: math.nan}, vector_weight=1.0, keyword_weight=1.0)


def test_rrf_merge_lists_hand_example() -> None:
    merged = rrf_merge_lists([[1, 2, 3], [2, 4], [2, 1]], rrf_k=60)
    scores = dict(merged)
    assert scores[2] == 1 / 62 + 1 / 61 + 1 / 61
    assert scores[1] == 1 / 61 + 1 / 62
    assert scores[4] == 1 / 62
    assert scores[3] == 1 / 63
    assert [cid for cid, _ in merged] == [2, 1, 4, 3]
    # equal scores and equal best ranks: the smaller id first
    assert [cid for cid, _ in rrf_merge_lists([[9, 5], [8, 4]], rrf_k=60)] == [8, 9, 4, 5]
    assert rrf_merge_lists([], rrf_k=60) == []


rankings = st.lists(st.integers(0, 30), max_size=25)
weights = st.floats(0.0, 1.0, allow_subnormal=False).filter(lambda w: w > 0)


@settings(max_examples=60, deadline=None)
@given(rankings, rankings, weights, st.floats(0.0, 1.0, allow_subnormal=False), st.integers(1, 100))
def test_rrf_properties(vector: list[int], keyword: list[int], vw: float, kw: float, k: int) -> None:
    fused = rrf_fuse(vector, keyword, vector_weight=vw, keyword_weight=kw, rrf_k=k)
    assert {c.chunk_id for c in fused} == set(vector) | set(keyword)
    best = max_rrf_score(vw, kw, k)
    assert all(0.0 <= c.score <= best for c in fused)
    keys = [(-c.score, c.best_rank, c.chunk_id) for c in fused]
    assert keys == sorted(keys)
    # the arms are symmetric: swapping the lists together with their weights swaps only the ranks' labels
    swapped = rrf_fuse(keyword, vector, vector_weight=kw, keyword_weight=vw, rrf_k=k)
    assert [(c.chunk_id, c.score, c.keyword_rank, c.vector_rank) for c in swapped] == [
        (c.chunk_id, c.score, c.vector_rank, c.keyword_rank) for c in fused
    ]
