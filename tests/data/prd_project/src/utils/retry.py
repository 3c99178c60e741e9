"""Retrying flaky calls."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def retry_with_backoff(call: Callable[[], T], *, attempts: int = 5, base_delay: float = 0.5) -> T:
    """Call ``call`` until it succeeds, sleeping exponentially longer (with jitter) after each failure."""
    for attempt in range(attempts):
        try:
            return call()
        except ConnectionError:
            if attempt == attempts - 1:
                raise
            time.sleep(base_delay * 2**attempt * (1 + random.random()))
    raise AssertionError("unreachable")


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``"1.5s"`` or ``"200ms"``."""
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.rstrip("s"))
