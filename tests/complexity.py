"""Growth checks without wall-clock bounds: how a call's work grows when its input grows tenfold.

A speed claim belongs in a benchmark (docs/benchmarks.md); these only catch a quadratic slip. Work is
this process's CPU time (other jobs on the machine do not count), the least of a few runs, and the
bound on the ratio is generous: linear work grows about 10x, quadratic work 100x.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: ratio above which tenfold input counts as worse than linear (n log n stays far below it)
LINEAR_BOUND = 30.0
#: small inputs are not measured below this many CPU seconds (clock and interpreter noise)
FLOOR_S = 0.002


def cpu_seconds(call: Callable[[], Any], *, runs: int = 3) -> float:
    """The least CPU time of this process over ``runs`` calls."""
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        call()
        best = min(best, time.process_time() - started)
    return best


def assert_linear(make_input: Callable[[int], T], call: Callable[[T], Any], *, n: int) -> None:
    """Fail when ``call`` on ``make_input(n)`` costs more than ``LINEAR_BOUND`` times ``make_input(n // 10)``."""
    small, large = make_input(n // 10), make_input(n)
    small_s = max(cpu_seconds(lambda: call(small)), FLOOR_S)
    large_s = cpu_seconds(lambda: call(large), runs=2)
    ratio = large_s / small_s
    assert ratio < LINEAR_BOUND, (
        f"tenfold input took {ratio:.0f}x the CPU time ({small_s:.3f} s -> {large_s:.3f} s): worse than linear"
    )
