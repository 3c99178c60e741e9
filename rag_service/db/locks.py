"""Advisory locks that keep two reindex runs on one collection, or a reindex and an edit, from interleaving.

A reindex holds its collection's lock exclusively for the whole run; an edit of single documents (the
HTTP API's DELETE) takes the same lock shared for its transaction, so edits exclude reindex runs but
not each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from rag_service.db.database import is_lost_connection
from rag_service.errors import ReindexInProgressError

_REINDEX_LOCK_CLASS = 0x5241  # "RA": the first key of pg_try_advisory_lock(int, int)


@contextmanager
def reindex_lock(engine: Engine, collection: str) -> Iterator[None]:
    """Hold the collection's reindex lock on a dedicated connection, or fail at once if it is taken.

    The lock is session-level, so it is released when the connection closes, also on a crash.
    """
    with engine.connect() as conn:
        params = {"cls": _REINDEX_LOCK_CLASS, "name": collection}
        acquired = conn.execute(text("SELECT pg_try_advisory_lock(:cls, hashtext(:name))"), params).scalar_one()
        conn.commit()
        if not acquired:
            raise ReindexInProgressError(
                f"another reindex of collection {collection!r} is running; wait for it to finish and run again"
            )
        try:
            yield
        finally:
            _unlock(conn, params)


def _unlock(conn: Connection, params: dict[str, object]) -> None:
    """Release the reindex lock; a connection lost meanwhile needs no release (the server ended its session),
    and its error must not hide the one the run is raising (a server that crashed on a full disk, say)."""
    try:
        conn.execute(text("SELECT pg_advisory_unlock(:cls, hashtext(:name))"), params)
        conn.commit()
    except DBAPIError as exc:
        if not is_lost_connection(exc):
            raise


def lock_for_edit(session: Session, collection: str) -> None:
    """Take the collection's reindex lock shared until the session's transaction ends, or fail at once.

    A reindex that read a document before an edit would write it back afterwards (a deleted document
    returns), so an edit waits for no reindex: it is refused while one runs.
    """
    params = {"cls": _REINDEX_LOCK_CLASS, "name": collection}
    statement = text("SELECT pg_try_advisory_xact_lock_shared(:cls, hashtext(:name))")
    if not session.execute(statement, params).scalar_one():
        raise ReindexInProgressError(
            f"collection {collection!r} is being reindexed; wait for the reindex to finish and try again"
        )
