"""Which tiktoken encoding each thread counts with (``tokens``): a copy only where ``own_encoding`` made one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rag_service.tokens import _shared_encoding, get_encoding, own_encoding

TEXT = "Replication slots keep WAL until every standby has read it: 42 tokens or so, with <|endoftext|> as text."


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    get_encoding.cache_clear()  # type: ignore[attr-defined]
    yield
    get_encoding.cache_clear()  # type: ignore[attr-defined]


def _in_thread(work: Callable[[], Any]) -> Any:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join(60)
    return out[0]


def test_a_new_thread_counts_with_the_shared_encoding_and_builds_nothing() -> None:
    """Building a copy holds the GIL ~0.2 s: an HTTP worker's first search stalled the whole server that long."""
    shared = get_encoding()  # this thread first
    assert _in_thread(get_encoding) is shared


def test_own_encoding_gives_a_worker_thread_its_copy_with_the_same_tokens() -> None:
    shared = get_encoding()

    def worker() -> tuple[Any, list[int]]:
        own_encoding()
        mine = get_encoding()
        return mine, mine.encode(TEXT, disallowed_special=())

    mine, tokens = _in_thread(worker)
    assert mine is not shared and mine.name == shared.name
    assert tokens == shared.encode(TEXT, disallowed_special=())


def test_the_first_user_keeps_the_shared_encoding() -> None:
    """The thread that used the shared encoding first is the one it runs fastest in: no copy for it."""

    def first_user() -> bool:
        get_encoding()
        own_encoding()
        return get_encoding() is _shared_encoding("cl100k_base")

    assert _in_thread(first_user)
