"""Advisory locks that keep two reindex runs on one collection, or a reindex and an edit, from interleaving.

A run (an ingest or a reindex) holds its collection's lock exclusively for the whole run; an edit of single
documents (the HTTP API's DELETE) takes the same lock shared for its transaction, so edits exclude runs but not
each other, and a run starting during an edit waits for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from hashlib import blake2b

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from rag_service.db.database import database_errors, is_lost_connection
from rag_service.errors import LockLostError, ReindexInProgressError

#: a collection's lock is the one-bigint advisory lock "RA" (16 bits) + 48 bits of a hash of its name: the two-int
#: form left 32 bits for the name, so two collections of a team could share a lock (and refuse each other's runs)
RUN_LOCK_TAG = 0x5241
_NAME_BYTES = 6

#: how long a run waits for edits, which hold its lock shared for one short transaction each
EDIT_WAIT = "10s"
_TRY = text("SELECT pg_try_advisory_lock(:key)")
# pg_locks shows a one-bigint lock as classid (its high 32 bits), objid (the low 32) and objsubid 1
_HELD_BY_A_RUN = text(  # a run holds it exclusively, an edit shared
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid = CAST(:high AS oid) AND objid = CAST(:low AS oid) AND objsubid = 1)"
)
_RUNS = text(  # every run's lock, whatever its collection
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock' "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND CAST(classid AS bigint) >> 16 = :tag AND objsubid = 1"
)
_LOCK_NOT_AVAILABLE = "55P03"
# the server process holding a lock, and the server's start (a restart ends every session and reuses pids)
_WHO = text("SELECT pg_backend_pid(), pg_postmaster_start_time()")
_STILL_HELD = text(
    "SELECT pg_postmaster_start_time() = :started AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
    "AND granted AND mode = 'ExclusiveLock' AND pid = :pid "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid = CAST(:high AS oid) AND objid = CAST(:low AS oid) AND objsubid = 1)"
)


def lock_key(collection: str) -> dict[str, int]:
    """The collection's lock as statement parameters: ``key`` (the bigint the lock functions take) and its
    ``high`` and ``low`` halves (how pg_locks shows it). Every process computes the same key from the name."""
    name_hash = int.from_bytes(blake2b(collection.encode("utf-8", "surrogatepass"), digest_size=_NAME_BYTES).digest())
    key = RUN_LOCK_TAG << (8 * _NAME_BYTES) | name_hash
    return {"key": key, "high": key >> 32, "low": key & 0xFFFFFFFF}


def running_runs(session: Session) -> int:
    """How many runs (ingests, reindexes) of any process hold their collection's lock now (a caller's own too)."""
    return int(session.execute(_RUNS, {"tag": RUN_LOCK_TAG}).scalar_one())


@dataclass(frozen=True, slots=True)
class RunLock:
    """A run's hold on its collection's lock: the session holding it, checked before each of the run's commits."""

    collection: str
    pid: int
    started: datetime

    def check(self, session: Session) -> None:
        """LockLostError unless the run's lock session still holds the lock, in ``session``'s transaction (a write
        about to commit). A database restart ends that session while the run's writes reconnect, and a second run
        could take the lock: this run must not write on beside it."""
        params = {**lock_key(self.collection), "pid": self.pid, "started": self.started}
        if not session.execute(_STILL_HELD, params).scalar_one():
            raise LockLostError(
                f"this run lost the lock of collection {self.collection!r} (the database restarted or ended the "
                "lock's session)"
            )


@contextmanager
def reindex_lock(engine: Engine, collection: str) -> Iterator[RunLock]:
    """Hold the collection's reindex lock on a dedicated connection: at once, after the edits that hold it for
    their transaction (up to ``EDIT_WAIT``), or fail at once when another run (an ingest or a reindex) holds it.

    The lock is session-level, so it is released when the connection closes, also on a crash. A database that
    cannot be reached for it is the one-line DatabaseUnavailableError (``database_errors``), as in a transaction.
    Yields the ``RunLock`` a run checks before each commit.
    """
    params = lock_key(collection)
    with database_errors(engine):
        conn = engine.connect()
    with conn:
        with database_errors(engine):
            acquired = _acquired(conn, params)
            pid, started = conn.execute(_WHO).one()
            conn.commit()
        if not acquired:
            raise ReindexInProgressError(
                f"another ingest or reindex of collection {collection!r} is running; "
                "wait for it to finish and run again"
            )
        try:
            yield RunLock(collection, pid, started)
        finally:
            _unlock(conn, params)


def _acquired(conn: Connection, params: dict[str, int]) -> bool:
    """Take the lock; a DELETE that took it shared a moment earlier is waited for, not taken for a run (while this
    run waits, later edits are refused: PostgreSQL queues them behind it)."""
    acquired = bool(conn.execute(_TRY, params).scalar_one())
    if not acquired and not conn.execute(_HELD_BY_A_RUN, params).scalar_one():
        conn.execute(text("SELECT set_config('lock_timeout', :wait, true)"), {"wait": EDIT_WAIT})
        try:
            conn.execute(text("SELECT pg_advisory_lock(:key)"), params)
            acquired = True
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                raise
            conn.rollback()
    conn.commit()
    return acquired


def _unlock(conn: Connection, params: dict[str, int]) -> None:
    """Release the reindex lock; a connection lost meanwhile needs no release (the server ended its session),
    and its error must not hide the one the run is raising (a server that crashed on a full disk, say)."""
    try:
        conn.execute(text("SELECT pg_advisory_unlock(:key)"), params)
        conn.commit()
    except DBAPIError as exc:
        if not is_lost_connection(exc):
            raise


def lock_for_edit(session: Session, collection: str) -> None:
    """Take the collection's reindex lock shared until the session's transaction ends, or fail at once.

    A reindex that read a document before an edit would write it back afterwards (a deleted document
    returns), so an edit waits for no reindex: it is refused while one runs.
    """
    statement = text("SELECT pg_try_advisory_xact_lock_shared(:key)")
    if not session.execute(statement, lock_key(collection)).scalar_one():
        raise ReindexInProgressError(
            f"collection {collection!r} is being indexed (an ingest or reindex is running); wait for it to finish "
            "and try again"
        )


def refuse_if_running(session: Session, collection: str) -> None:
    """ReindexInProgressError when an ingest or reindex holds the collection now (a job is refused up front
    instead of failing a moment after it was accepted); an edit's brief shared hold does not count."""
    if session.execute(_HELD_BY_A_RUN, lock_key(collection)).scalar_one():
        raise ReindexInProgressError(
            f"another ingest or reindex of collection {collection!r} is running; wait for it to finish and try again"
        )
