"""The benchmarks' probe of the host's memory (scripts/bench_lib/measure): it times the read, not the idle."""

from __future__ import annotations

import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from bench_lib import measure  # noqa: E402


def test_the_memory_probe_sleeps_then_times_only_the_read() -> None:
    """``memory_retouch_ms`` (the host's state, recorded beside the 1M latencies): the idle is not in its number."""
    started = time.perf_counter()
    read_ms = measure.memory_retouch_ms(idle_s=0.2, megabytes=4)
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert elapsed_ms >= 200
    assert 0 < read_ms < elapsed_ms - 190
