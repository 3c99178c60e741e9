"""Per-stage latency samples (milliseconds) and their summary.

Percentiles use numpy's default ``method="linear"`` (Hyndman & Fan type 7, as Excel's
``PERCENTILE.INC``): for ``n`` sorted values the p-th percentile sits at position ``(n - 1) * p / 100``
and interpolates linearly between its two neighbours. With one sample every percentile is that sample.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from rag_service.errors import ConfigurationError

__all__ = ["LatencyRecorder"]


class LatencyRecorder:
    """Collects latency samples in milliseconds, grouped by stage name (e.g. ``"embed"``, ``"search"``)."""

    def __init__(self) -> None:
        self._samples: dict[str, list[float]] = {}

    def record(self, stage: str, ms: float) -> None:
        """Add one sample of ``ms`` milliseconds to ``stage``."""
        if not math.isfinite(ms) or ms < 0:
            raise ConfigurationError(f"latency {ms!r} ms for stage {stage!r} must be a finite number >= 0")
        self._samples.setdefault(stage, []).append(float(ms))

    @contextmanager
    def measure(self, stage: str) -> Iterator[None]:
        """Time the ``with`` block with ``time.perf_counter`` and record it under ``stage``, even on error."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.record(stage, (time.perf_counter() - start) * 1000.0)

    def samples(self, stage: str) -> list[float]:
        """A copy of the samples recorded for ``stage``, in recording order (empty if none)."""
        return list(self._samples.get(stage, []))

    def summary(self) -> dict[str, dict[str, float]]:
        """``{stage: {"p50", "p95", "mean", "n"}}`` for every stage with samples, in first-recorded order."""
        result: dict[str, dict[str, float]] = {}
        for stage, values in self._samples.items():
            array = np.asarray(values, dtype=np.float64)
            p50, p95 = np.percentile(array, [50.0, 95.0], method="linear").tolist()
            result[stage] = {"p50": p50, "p95": p95, "mean": float(array.mean()), "n": len(values)}
        return result
