"""Locks a forked child gets anew (``forks.ChildLock``): a lock a parent's thread held at the fork is free in the
child, so the child's first use does not wait forever (a model loading on a warm-up thread when gunicorn
``--preload`` or Celery prefork forks)."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from rag_service.embed import HashingEmbedder, LazyEmbedder
from rag_service.forks import ChildLock

pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")

CHILD_TIMEOUT_S = 20


def _in_forked_child(work: Callable[[], bool]) -> int | None:
    """Run ``work`` in a forked child; its exit code (0: it returned True), None if it did not end in time."""

    def run() -> None:
        raise SystemExit(0 if work() else 1)

    child = multiprocessing.get_context("fork").Process(target=run, daemon=True)
    child.start()
    child.join(CHILD_TIMEOUT_S)
    if child.exitcode is None:
        child.kill()
        child.join()
        return None
    return child.exitcode


@contextmanager
def held_by_a_thread(hold: Callable[[threading.Event], None]) -> Iterator[None]:
    """A parent's thread running ``hold(release)`` (which holds a lock until ``release`` is set)."""
    release, started = threading.Event(), threading.Event()

    def body() -> None:
        started.set()
        hold(release)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    started.wait(5)
    try:
        yield
    finally:
        release.set()
        thread.join(5)


@pytest.mark.parametrize("reentrant", [False, True], ids=["lock", "rlock"])
def test_a_lock_a_parents_thread_holds_is_free_in_a_forked_child(reentrant) -> None:
    lock = ChildLock(reentrant=reentrant)

    def hold(release: threading.Event) -> None:
        with lock:
            release.wait(30)

    with held_by_a_thread(hold):
        assert not lock.acquire(timeout=0.1), "precondition: the parent's thread holds it"
        assert _in_forked_child(lambda: lock.acquire(timeout=5)) == 0
    with lock:  # the parent's lock works as before once its thread lets go
        assert not _acquired_elsewhere(lock)


def _acquired_elsewhere(lock: ChildLock) -> bool:
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(lock.acquire(timeout=0.1)))
    thread.start()
    thread.join()
    return got[0]


def test_a_child_forked_while_the_model_loads_on_another_thread_loads_its_own() -> None:
    loading = threading.Event()

    def load() -> HashingEmbedder:
        if threading.current_thread() is not threading.main_thread():  # the parent's warm-up thread
            loading.set()
            threading.Event().wait(30)
        return HashingEmbedder()

    lazy = LazyEmbedder(load, model_id=HashingEmbedder().model_id, dim=HashingEmbedder().dim)
    warm_up = threading.Thread(target=lazy.model, daemon=True)
    warm_up.start()
    assert loading.wait(5), "precondition: the warm-up thread is loading, holding the model's lock"
    assert _in_forked_child(lambda: len(lazy.embed_query("backups")) == lazy.dim) == 0
