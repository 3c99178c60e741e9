"""MMR: relevance order at diversity 0, distinct picks with diversity, validation, speed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_service.errors import ConfigurationError
from rag_service.retrieve.mmr import mmr_select


def _near_duplicates() -> tuple[list[float], np.ndarray]:
    relevance = [0.9, 0.89, 0.88, 0.5]
    embeddings = np.array([[1.0, 0.0, 0.0], [0.999, 0.01, 0.0], [0.998, 0.0, 0.02], [0.0, 1.0, 0.0]])
    return relevance, embeddings


def test_diversity_zero_keeps_relevance_order() -> None:
    relevance = [0.2, 0.9, 0.5, 0.9, 0.1]
    embeddings = np.eye(5)
    assert mmr_select(relevance, embeddings, k=5, diversity=0.0) == [1, 3, 2, 0, 4]
    assert mmr_select(relevance, embeddings, k=2, diversity=0.0) == [1, 3]


def test_diversity_zero_ignores_duplicates() -> None:
    relevance, embeddings = _near_duplicates()
    assert mmr_select(relevance, embeddings, k=3, diversity=0.0) == [0, 1, 2]


def test_diversity_picks_a_distinct_chunk_second() -> None:
    relevance, embeddings = _near_duplicates()
    assert mmr_select(relevance, embeddings, k=2, diversity=0.5) == [0, 3]
    assert mmr_select(relevance, embeddings, k=4, diversity=0.5)[:2] == [0, 3]


def test_full_diversity_still_starts_with_the_most_relevant() -> None:
    relevance, embeddings = _near_duplicates()
    assert mmr_select([0.1, 0.2, 0.3, 0.95], embeddings, k=1, diversity=1.0) == [3]
    assert mmr_select(relevance, embeddings, k=2, diversity=1.0) == [0, 3]


def test_vector_norm_does_not_matter() -> None:
    relevance, embeddings = _near_duplicates()
    scaled = embeddings * np.array([[3.0], [0.01], [250.0], [7.0]])
    assert mmr_select(relevance, scaled, k=4, diversity=0.4) == mmr_select(relevance, embeddings, k=4, diversity=0.4)


def test_zero_vector_and_float32_input() -> None:
    embeddings = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert mmr_select([0.9, 0.3, 0.8], embeddings, k=3, diversity=0.7) == [0, 1, 2]


def test_k_larger_than_candidates_and_zero() -> None:
    relevance, embeddings = _near_duplicates()
    assert sorted(mmr_select(relevance, embeddings, k=50, diversity=0.3)) == [0, 1, 2, 3]
    assert mmr_select(relevance, embeddings, k=0, diversity=0.3) == []
    assert mmr_select([], np.zeros((0, 3)), k=5, diversity=0.3) == []


@pytest.mark.parametrize("diversity", [-0.1, 1.5, math.nan, True, "0.5"])
def test_invalid_diversity_raises(diversity: object) -> None:
    with pytest.raises(ConfigurationError, match=r"diversity .* must be between 0 and 1"):
        mmr_select([1.0], np.ones((1, 2)), k=1, diversity=diversity)  # type: ignore[arg-type]


def test_invalid_k_and_shapes_raise() -> None:
    with pytest.raises(ConfigurationError, match="k \\(-1\\)"):
        mmr_select([1.0], np.ones((1, 2)), k=-1, diversity=0.5)
    with pytest.raises(ValueError, match="one relevance score per embedding row"):
        mmr_select([1.0, 0.5], np.ones((3, 2)), k=1, diversity=0.5)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(0, 25),
    st.floats(0.0, 1.0),
    st.integers(0, 2**32 - 1),
)
def test_selection_is_unique_and_bounded(n: int, k: int, diversity: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    relevance = rng.random(n).tolist()
    picked = mmr_select(relevance, rng.normal(size=(n, 8)), k=k, diversity=diversity)
    assert len(picked) == min(k, n) == len(set(picked))
    assert all(0 <= i < n for i in picked)
    if picked:
        assert picked[0] == int(np.argmax(relevance))


def test_large_selection_follows_the_objective() -> None:
    """2000 candidates of 384 dimensions: every pick is the argmax of the module docstring's formula.

    How fast it runs is a benchmark's business (retrieve() reports it as ``metrics.mmr_time_ms``), not a test's.
    """
    rng = np.random.default_rng(0)
    relevance = rng.random(2000)
    embeddings = rng.normal(size=(2000, 384)).astype(np.float32)
    picked = mmr_select(relevance.tolist(), embeddings, k=50, diversity=0.3)
    assert len(picked) == len(set(picked)) == 50
    unit = embeddings.astype(np.float64) / np.linalg.norm(embeddings.astype(np.float64), axis=1, keepdims=True)
    for step in range(1, 50):
        chosen = picked[:step]
        objective = 0.7 * relevance - 0.3 * (unit @ unit[chosen].T).max(axis=1)
        objective[chosen] = -np.inf
        assert picked[step] == int(np.argmax(objective)), f"pick {step}"
