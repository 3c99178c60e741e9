"""The benchmarks' tie-aware recall: a tied group straddling the k-th place is no miss (scripts/bench_lib/measure)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from bench_lib import measure  # noqa: E402


def _corpus() -> tuple[np.ndarray, np.ndarray]:
    """Six unit vectors: ids 1-3 identical (nearest the query), 4 next, 5-6 far."""
    rows = [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0]]
    return np.array(rows, dtype=np.float32), np.array([[1.0, 0.0]], dtype=np.float32)


def test_a_tie_broken_the_other_way_is_no_miss() -> None:
    vectors, queries = _corpus()
    truth = [[1, 2]]
    other = measure.exact_top_k_other_tie_break(vectors, queries, 2)
    assert other == [[3, 2]]
    assert measure.overlap_at_k(other, truth) == 0.5
    assert measure.recall_with_ties(other, truth, vectors, queries) == 1.0


def test_a_farther_chunk_is_a_miss() -> None:
    vectors, queries = _corpus()
    assert measure.recall_with_ties([[1, 4]], [[1, 2]], vectors, queries) == 0.5
    assert measure.recall_with_ties([[5, 6]], [[1, 2]], vectors, queries) == 0.0
