"""Stop signals: SIGTERM takes SIGINT's path, so every command stops the same way on either.

Python turns SIGINT into ``KeyboardInterrupt``, which unwinds the stack: open transactions roll
back, locks are released, ``finally`` blocks and exit handlers run (the last user of the embedded
PostgreSQL stops it there). SIGTERM's default action ends the process at once and skips all of that,
yet it is how ``docker stop``, systemd and Kubernetes stop a service. ``stop_signals()`` makes
SIGTERM raise ``Interrupted``, a ``KeyboardInterrupt``, so code that handles one handles both.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: the signals that ask a process to stop
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop signal ended the work; ``partial`` (when set) is what was done before it (e.g. an ingest report)."""

    def __init__(self, signum: int, partial: object = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.partial = partial


def signal_number(stop: KeyboardInterrupt) -> int:
    """The signal behind ``stop``: SIGINT for a plain ``KeyboardInterrupt``."""
    return stop.signum if isinstance(stop, Interrupted) else int(signal.SIGINT)


def exit_status(stop: KeyboardInterrupt) -> int:
    """The shell's status for a command ended by ``stop``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + signal_number(stop)


def interrupted(stop: KeyboardInterrupt, partial: object) -> Interrupted:
    """``stop`` again, carrying ``partial``: what the interrupted work had done."""
    return Interrupted(signal_number(stop), partial)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # only it may set signal handlers


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within: SIGTERM raises ``Interrupted`` as SIGINT raises ``KeyboardInterrupt`` (restored after)."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def deferred_stop() -> Iterator[None]:
    """Within: a stop signal waits until the block ends, then takes effect (a commit and its counting stay whole).

    Outside the main thread signals never arrive, so this does nothing there.
    """
    if not _in_main_thread():
        yield
        return
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    if any(handler is None for handler in previous.values()):  # set outside Python: cannot be put back
        yield
        return
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # None was ruled out above
        for signum in caught[:1]:  # the first stop, to whoever handled it before
            signal.raise_signal(signum)
