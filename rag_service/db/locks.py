"""Advisory locks that keep two reindex runs on one collection from interleaving."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

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
            conn.execute(text("SELECT pg_advisory_unlock(:cls, hashtext(:name))"), params)
            conn.commit()
