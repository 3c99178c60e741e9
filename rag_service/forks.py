"""What a process forked after the service was made (gunicorn ``--preload``, Celery prefork, multiprocessing's
"fork") must not share with its parent, and the one warning such a child gets.

A child inherits the parent's memory but only the thread that forked: pooled connections whose sockets the
parent still uses, thread pools whose workers do not exist in the child, and locks another thread may have held.
Each module that keeps such state registers a callback with ``after_fork_in_child``; the callbacks run in the
child right after ``os.fork()`` and only drop or replace state, never close what the parent uses. Work that may
block (joining the embedded server, the warning) waits for the child's first new database connection
(``first_use_in_child``, called by every engine ``db.engine.make_engine`` built).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable
from types import MethodType

from rag_service.onnx_runtime import telemetry_thread_may_run

log = logging.getLogger(__name__)

_callbacks: list[Callable[[], Callable[[], None] | None]] = []  # each gives its callback, or None once collected
_first_use: list[Callable[[], None]] = []  # run once, at the first connection a child makes
_hooked = False
_lock = threading.Lock()

#: the warning of a child whose parent had loaded ONNX Runtime (README, "Pre-forking servers")
ONNX_EXIT_WARNING = (
    "this process (pid %d) was forked from one that had loaded ONNX Runtime: it may hang when it exits through "
    "sys.exit (ONNX Runtime's telemetry thread); set ORT_DISABLE_TELEMETRY=1 in the environment the parent starts "
    "with, or create the service in each worker (gunicorn without --preload or in post_fork, Celery's "
    "worker_process_init) - README, 'Pre-forking servers'"
)


def after_fork_in_child(callback: Callable[[], None]) -> None:
    """Call ``callback`` in every child forked from now on, before anything else runs there.

    A bound method is held weakly (its object may be collected; the callback then stops); a function strongly.
    The callback must not block or do I/O: it only drops or replaces state.
    """
    global _hooked
    held: Callable[[], Callable[[], None] | None] = (
        weakref.WeakMethod(callback) if isinstance(callback, MethodType) else functools.partial(_same, callback)
    )
    with _lock:
        _callbacks[:] = [c for c in _callbacks if c() is not None]  # forget the collected ones
        _callbacks.append(held)
        if not _hooked:
            os.register_at_fork(after_in_child=_run_in_child)
            _hooked = True


def _same(callback: Callable[[], None]) -> Callable[[], None]:
    return callback


def at_first_use_in_child(callback: Callable[[], None]) -> None:
    """Run ``callback`` once at this (forked) process's first new database connection (from a fork callback)."""
    _first_use.append(callback)


def first_use_in_child() -> None:
    """Run what forked-child callbacks left for the first connection (nothing in a process that did not fork)."""
    while _first_use:
        try:
            callback = _first_use.pop(0)
        except IndexError:  # another thread's first connection took it
            return
        callback()


def _run_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a parent's thread may have held it
    _first_use.clear()  # an unused parent's list: the callbacks below add again what this child needs
    if telemetry_thread_may_run():
        at_first_use_in_child(_warn_onnx_exit)
    for held in list(_callbacks):
        callback = held()
        if callback is not None:
            callback()


def _warn_onnx_exit() -> None:
    log.warning(ONNX_EXIT_WARNING, os.getpid())


class ChildLock:
    """A ``threading.Lock`` (``RLock`` with ``reentrant``) that a forked child gets anew, free.

    A lock another thread of the parent held at the fork stays held in the child for good (that thread does not
    exist there), and the child's first use waits forever: a model loading on a warm-up thread when gunicorn
    ``--preload`` or Celery forks, an embedding call in flight. Use it as the lock it stands for.
    """

    __slots__ = ("__weakref__", "_lock", "_reentrant")

    def __init__(self, *, reentrant: bool = False) -> None:
        self._reentrant = reentrant
        self._lock = self._new()
        after_fork_in_child(self._renew)

    def _new(self) -> threading.Lock | threading.RLock:
        return threading.RLock() if self._reentrant else threading.Lock()

    def _renew(self) -> None:
        self._lock = self._new()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Acquire the lock, as ``threading.Lock.acquire``."""
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        """Release the lock."""
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
