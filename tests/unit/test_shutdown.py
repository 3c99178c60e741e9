"""Stop signals, sent for real to this process: SIGTERM raises like SIGINT, and a deferred stop waits for its block."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from rag_service.shutdown import Interrupted, deferred_stop, exit_status, interrupted, stop_signals


def test_sigterm_raises_interrupted_within_stop_signals_and_the_handler_is_restored_after() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as raised, stop_signals():
        os.kill(os.getpid(), signal.SIGTERM)  # Python runs the handler before the next line
        pytest.fail("SIGTERM did not raise")
    assert raised.value.signum == signal.SIGTERM and exit_status(raised.value) == 143
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.fixture
def sigint_as_usual() -> Iterator[None]:
    """SIGINT raising KeyboardInterrupt, as in a process started from a terminal (a suite started in the
    background by a script inherits SIGINT ignored, and Python then leaves it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_as_usual")
def test_a_stop_inside_deferred_stop_takes_effect_when_the_block_ends() -> None:
    finished = []
    with pytest.raises(KeyboardInterrupt) as raised, deferred_stop():
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
        finished.append("the block ran to its end")
    assert finished == ["the block ran to its end"]
    assert exit_status(raised.value) == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_interrupted_carries_what_was_done_and_keeps_the_signal() -> None:
    stop = interrupted(Interrupted(signal.SIGTERM), partial={"updated": 3})
    assert isinstance(stop, KeyboardInterrupt) and stop.partial == {"updated": 3} and exit_status(stop) == 143
