"""A circuit breaker: after repeated connection failures, fail fast instead of hammering the database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rag_service.errors import DatabaseUnavailableError
from rag_service.forks import after_fork_in_child

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures; after ``cooldown`` seconds one trial call may pass.

    A success closes it again. While open, ``check()`` raises DatabaseUnavailableError at once.
    """

    def __init__(
        self, *, threshold: int = 5, cooldown: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_running = False
        self._lock = threading.Lock()
        self.opened_count = 0
        after_fork_in_child(self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()  # in a forked child: a parent's thread may have held it

    @property
    def state(self) -> str:
        """closed, open, or half-open (cool-down over, a trial call allowed)."""
        with self._lock:
            return self._state()

    def _state(self) -> str:
        if self._opened_at is None:
            return CLOSED
        return HALF_OPEN if self._clock() - self._opened_at >= self.cooldown else OPEN

    def check(self, target: str) -> None:
        """Raise if calls should not reach the database now."""
        with self._lock:
            state = self._state()
            if state == CLOSED:
                return
            if state == HALF_OPEN and not self._trial_running:
                self._trial_running = True
                return
            assert self._opened_at is not None
            wait = max(self.cooldown - (self._clock() - self._opened_at), 0.0)
            attempts = "attempt" if self._failures == 1 else f"{self._failures} attempts in a row"
            raise DatabaseUnavailableError(  # attempts, not calls: one call retries a lost connection (Database.read)
                f"{target} is unreachable (circuit open: the last {attempts} to reach it failed, retries included); "
                f"calls fail at once for {wait:.1f} s more - check that the database is running, then retry"
            )

    def success(self) -> None:
        """A call reached the database: close the circuit."""
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial_running = False

    def failure(self) -> None:
        """A call failed to reach the database."""
        with self._lock:
            self._failures += 1
            self._trial_running = False
            if self._opened_at is not None or self._failures >= self.threshold:
                if self._opened_at is None:
                    self.opened_count += 1
                self._opened_at = self._clock()
