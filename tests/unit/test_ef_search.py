"""hnsw.ef_search from the collection's size."""

from __future__ import annotations

from rag_service.db.search_request import EF_SEARCH_REFERENCE_CHUNKS, ef_search_for
from rag_service.knobs import MAX_EF_SEARCH


def test_the_setting_holds_up_to_the_reference_size() -> None:
    for chunks in (0, 1, 5_000, EF_SEARCH_REFERENCE_CHUNKS):
        assert ef_search_for(chunks, base=100, depth=20) == 100


def test_it_grows_with_the_size_and_stays_within_bounds() -> None:
    sizes = [EF_SEARCH_REFERENCE_CHUNKS * k for k in (1, 2, 3, 10, 30, 100, 1000)]
    values = [ef_search_for(n, base=100, depth=20) for n in sizes]
    assert values == sorted(values) and values[0] < values[3]
    assert values[-1] == MAX_EF_SEARCH
    assert ef_search_for(0, base=10, depth=80) == 80  # never fewer candidates than the arm returns


def test_a_million_chunks_search_with_the_ef_measured_for_them() -> None:
    # ef 800: recall@20 with ties 0.958-0.969 on every 1M build measured, vector p95 under 15 ms (docs/benchmarks.md)
    assert ef_search_for(10 * EF_SEARCH_REFERENCE_CHUNKS, base=100, depth=20) == 800
    assert ef_search_for(100 * EF_SEARCH_REFERENCE_CHUNKS, base=100, depth=20) == MAX_EF_SEARCH == 1000


def test_three_hundred_thousand_chunks_get_the_ef_that_held_their_recall() -> None:
    # at 300k recall@20 was 0.946 with ef 269 and 0.963 with 400 (docs/benchmarks.md, "Session 18")
    assert ef_search_for(3 * EF_SEARCH_REFERENCE_CHUNKS, base=100, depth=20) >= 400
