"""An ingest's statistics refresh never waits for a table a VACUUM holds.

Autovacuum holds SHARE UPDATE EXCLUSIVE on the table it vacuums, and PostgreSQL cancels it when another session waits
for that lock (``canceling autovacuum task``). The refresh's ``ANALYZE`` asks for the same lock: with a collection
re-indexed every few seconds, each ingest cancelled the autovacuum of ``document_chunks`` (whose HNSW index takes
longest to vacuum) before it finished, and the table and its indexes grew with every run (7x in 40 runs).
"""

from __future__ import annotations

import time

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from rag_service.db.statistics import PLANNED_MIN_CHUNKS, refresh_after_graph_rebuild, refresh_after_write

HELD = ("document_chunks", "chunk_edges")


def test_the_statistics_refresh_skips_a_table_a_vacuum_holds_instead_of_waiting(engine: Engine) -> None:
    with engine.connect() as vacuum:  # what autovacuum holds on the table it is vacuuming
        vacuum.execute(text(f"LOCK TABLE {', '.join(HELD)} IN SHARE UPDATE EXCLUSIVE MODE"))
        with engine.connect() as conn, Session(bind=conn) as session:
            session.execute(text("SET LOCAL lock_timeout = '3s'"))  # a wait this long cancels autovacuum (1 s)
            size = {"c": "large", "n": PLANNED_MIN_CHUNKS}  # large enough to be analysed (not left to autoanalyze)
            session.execute(text("INSERT INTO collection_stats VALUES (:c, :n, :n)"), size)
            started = time.monotonic()
            assert refresh_after_write(session, collection="large", chunks_written=PLANNED_MIN_CHUNKS)
            refresh_after_graph_rebuild(session)
            waited = time.monotonic() - started
            session.rollback()
        vacuum.rollback()
    assert waited < 1.0, f"the refresh waited {waited:.1f} s for the lock a VACUUM holds"


def test_the_vacuum_before_a_first_pack_skips_postings_a_vacuum_holds(engine: Engine) -> None:
    """The postings' VACUUM before a collection's first pack waited for autovacuum's lock (cancelling it)."""
    import threading

    from rag_service.db.database import Database
    from rag_service.db.packed_postings import _settle_postings

    with engine.connect() as vacuum:
        vacuum.execute(text("LOCK TABLE chunk_terms IN SHARE UPDATE EXCLUSIVE MODE"))
        release = threading.Timer(3.0, vacuum.rollback)  # a waiting VACUUM gets the lock after 3 s, not never
        release.start()
        started = time.monotonic()
        try:
            _settle_postings(Database(engine))
        finally:
            waited = time.monotonic() - started
            release.cancel()
            release.join()
        vacuum.rollback()  # when the timer did not (a no-op when it did)
    assert waited < 1.0, f"the vacuum waited {waited:.1f} s for the lock another VACUUM holds"
