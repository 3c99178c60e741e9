"""The circuit breaker opens after repeated failures, fails fast, and lets one trial through later."""

from __future__ import annotations

import pytest

from rag_service.db.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker
from rag_service.errors import DatabaseUnavailableError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_opens_fails_fast_then_half_opens_and_closes():
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, cooldown=10.0, clock=clock)
    for _ in range(2):
        breaker.check("db")
        breaker.failure()
    assert breaker.state == CLOSED
    breaker.failure()
    assert breaker.state == OPEN and breaker.opened_count == 1
    with pytest.raises(
        DatabaseUnavailableError,
        match=r"circuit open: the last 3 attempts in a row to reach it failed, retries included\); "
        r"calls fail at once for 10\.0 s more - check that the database is running, then retry",
    ):
        breaker.check("db")
    clock.now = 10.0
    assert breaker.state == HALF_OPEN
    breaker.check("db")  # the trial call
    with pytest.raises(DatabaseUnavailableError):
        breaker.check("db")  # only one trial at a time
    breaker.success()
    assert breaker.state == CLOSED
    breaker.check("db")


def test_failed_trial_reopens_for_a_full_cooldown():
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, cooldown=5.0, clock=clock)
    breaker.failure()
    clock.now = 5.0
    breaker.check("db")
    breaker.failure()
    assert breaker.state == OPEN
    clock.now = 9.0
    assert breaker.state == OPEN
    clock.now = 10.0
    assert breaker.state == HALF_OPEN
