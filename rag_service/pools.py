"""A thread pool made on first use and made anew in a forked child (``rag_service.forks``).

A ``ThreadPoolExecutor`` inherited across ``fork`` counts workers that exist only in the parent: it starts no
thread for a submitted call, which then waits forever. The child gets a new pool on its first call instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rag_service.forks import after_fork_in_child


class LazyThreadPool:
    """``workers`` threads named ``name``-N, each starting with ``initializer``; made by ``get``, ended by
    ``shutdown``; forgotten (not shut down: its threads are the parent's) in a forked child."""

    def __init__(self, workers: int, name: str, *, initializer: Callable[[], object] | None = None) -> None:
        self.workers = workers
        self.name = name
        self._initializer = initializer
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        after_fork_in_child(self._forget)

    def get(self) -> ThreadPoolExecutor:
        """The pool, made now if this process has none."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, self.name, initializer=self._initializer)
            return self._executor

    def shutdown(self) -> None:
        """Wait for the running calls and end the threads; a later ``get`` makes a new pool."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _forget(self) -> None:
        self._lock = threading.Lock()  # a parent's thread may have held it
        self._executor = None
