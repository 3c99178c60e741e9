"""Stop signals: SIGTERM takes SIGINT's path, so every command stops the same way on either.

Python turns SIGINT into ``KeyboardInterrupt``, which unwinds the stack: open transactions roll
back, locks are released, ``finally`` blocks and exit handlers run (the last user of the embedded
PostgreSQL stops it there). SIGTERM's default action ends the process at once and skips all of that,
yet it is how ``docker stop``, systemd and Kubernetes stop a service. ``stop_signals()`` makes
SIGTERM raise ``Interrupted``, a ``KeyboardInterrupt``, so code that handles one handles both.

Neither is raised while an import runs: importlib takes its locks (the global import lock, each
module's lock) in Python code, so an exception between an acquire and its ``try`` left one held for
good, and every other thread that imported then waited forever (a cold ``rag query`` stopped in its
first half second hung: its threads load the model and start the database while the main thread
imports). Raised in a finalizer an import ran, the stop was lost. Only the whole stack tells: a second
stop can come inside the handler of a first that importlib's code was running. So a stop that comes
during an import is sent again a few milliseconds later, until the import has ended.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: the signals that ask a process to stop
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: the code names of importlib's frozen modules: with one of them on the stack, a stop is sent again later
_IMPORT_MACHINERY = "<frozen importlib._bootstrap"
#: how long a stop that came during an import waits before it is sent again
_RESEND_AFTER_S = 0.005


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


#: the stop signals raised in this process (``stop_received``)
_RAISED: list[int] = []


def stop_received() -> bool:
    """Whether a stop signal was raised in this process (as ``KeyboardInterrupt`` or ``Interrupted``)."""
    return bool(_RAISED)


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    if importing(frame):
        _send_again(signum)
        return
    _RAISED.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt  # as Python's own handler does
    raise Interrupted(signum)


def importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` (where a signal handler was called) or a caller of it is importlib's code: an import runs."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(_IMPORT_MACHINERY):
            return True
        frame = frame.f_back
    return False


def _send_again(signum: int) -> None:
    """``signum`` to the main thread once more, shortly (a real signal: a blocking wait there is interrupted too)."""
    main = threading.main_thread().ident
    assert main is not None  # the main thread has started: it runs this handler
    resend = threading.Timer(_RESEND_AFTER_S, signal.pthread_kill, (main, signum))
    resend.daemon = True
    resend.start()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # only it may set signal handlers


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within: SIGTERM raises ``Interrupted`` as SIGINT raises ``KeyboardInterrupt``, never while an import
    runs (restored after). A SIGINT that Python was started ignoring (``cmd &`` in a script) stays ignored."""
    if not _in_main_thread():
        yield
        return
    ours = [signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else []
    ours.append(signal.SIGTERM)  # last: a process that catches SIGTERM has both
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in ours}
    driver = logging.getLogger("psycopg")
    driver.addFilter(_quiet_after_stop)
    try:
        yield
    finally:
        driver.removeFilter(_quiet_after_stop)
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


def _quiet_after_stop(record: logging.LogRecord) -> bool:
    """Drop psycopg's warnings once a stop was raised: a command it interrupted cannot be rolled back on its
    connection ("error ignored in rollback ...: another command is already in progress"), which is expected, and
    a stopped command prints one line (``interrupted``/``terminated``)."""
    return not _RAISED


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
