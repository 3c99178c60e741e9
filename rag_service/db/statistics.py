"""Planner statistics of the tables retrieval reads by collection, refreshed by the ingest that needs it.

Autoanalyze refreshes a table once 10% of its rows changed, so a new collection in a large
database can stay unknown to the planner for a long time (estimated at one row). The hybrid
statement's plan is built not to depend on that (``rag_service.db.search``), but every estimate of
the collection's rows stays wrong until ``ANALYZE``: the ingest that created a collection, or
rewrote a large part of one, runs it itself (issue 23).
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from rag_service.db.database import Database, database_errors
from rag_service.db.models import CollectionStats
from rag_service.db.partitions import is_partitioned

#: the tables retrieval reads by collection: the hybrid statement's (chunks, postings, the BM25 statistics, the
#: contexts) and the graph walk's edges. Left out of it, a graph walk in a collection the planner estimated at
#: one row read every edge of the collection for each chunk it stepped from (2,284 chunks: 21 ms against 0.4).
#: SKIP_LOCKED: a table a VACUUM holds is left to it. Waiting for its lock cancelled autovacuum (PostgreSQL cancels it
#: for a waiting session): a collection re-indexed every few seconds cancelled every vacuum of ``document_chunks``
#: (its HNSW index is slow to vacuum), and the table and its indexes grew with each run (7x in 40 runs, 2,950 chunks)
_ANALYZE = (
    "ANALYZE (SKIP_LOCKED) "
    "documents, document_chunks, chunk_terms, lexeme_stats, document_contexts, context_terms, chunk_edges"
)

#: what a rebuild of a collection's graph rewrote (SKIP_LOCKED: as ``_ANALYZE``)
_ANALYZE_GRAPH = "ANALYZE (SKIP_LOCKED) chunk_edges"

#: the tables retrieval reads index-only (postings, BM25 statistics, contexts, edges). Until a VACUUM marks a new
#: collection's pages all-visible, every such read also fetches the row: the workflow preset's retrieval on 2,284 new
#: chunks 13.9-16.6 ms p50 against 12.1-12.4 after it. INDEX_CLEANUP AUTO: a new collection leaves no dead rows, so
#: the indexes are skipped and the cost stays with the new pages (0.03 s there). Not OFF: that left a rewritten
#: collection's dead entries in the indexes and reset the dead-row count autovacuum goes by, so nothing ever removed
#: them (a collection re-indexed every ~12 s: pk_chunk_terms 30x its rows' size, growing with each run)
_VACUUM = (
    "VACUUM (INDEX_CLEANUP AUTO, SKIP_LOCKED) chunk_terms, lexeme_stats, document_contexts, context_terms, chunk_edges"
)

#: the share of a collection's chunks an ingest must write to refresh the statistics (autovacuum's
#: default ``autovacuum_analyze_scale_factor``, applied to the collection instead of the table)
REFRESH_SHARE = 0.1


#: a collection of fewer chunks than this, and than ``PLANNED_TABLE_SHARE`` of the chunks table, is left to autoanalyze:
#: its misestimate costs a plan little (the graph walk's trap of issue 23 was 21 ms against 0.4 at 2,284 chunks), and
#: ``ANALYZE``'s fixed sample (30,000 rows a table) costs every new small collection seconds: 3.8 s beside 68,000
#: chunks (2.4 of them the chunks' wide columns), against 0.3-2 s for the whole ingest of a 60-chunk collection
PLANNED_MIN_CHUNKS = 1000
PLANNED_TABLE_SHARE = 0.01

# the live rows the statistics hold for the chunks table (each partition's, when partitioned); a catalog read
_TABLE_ROWS = text(
    "SELECT coalesce(sum(greatest(c.reltuples, 0)), 0) FROM pg_class c WHERE c.relkind = 'r' AND (c.oid = "
    "to_regclass('document_chunks') OR c.oid IN (SELECT relid FROM pg_partition_tree('document_chunks') WHERE isleaf))"
)


def collection_chunks(session: Session, collection: str) -> int:
    """How many chunks ``collection`` holds now (its statistics row, kept by the chunks' triggers; 0 without one)."""
    return int(session.scalar(select(CollectionStats.chunk_count).where(CollectionStats.collection == collection)) or 0)


def refresh_after_write(session: Session, *, collection: str, chunks_written: int) -> bool:
    """``ANALYZE`` the planned tables when ``chunks_written`` is at least ``REFRESH_SHARE`` of the
    collection's chunks (a new collection: all of them) and the collection is large enough for its plans to
    depend on it (``PLANNED_MIN_CHUNKS``, or ``PLANNED_TABLE_SHARE`` of the chunks); True when it ran.

    ``ANALYZE`` reads a fixed-size sample (300 x ``default_statistics_target`` rows per table),
    so its cost does not grow with the database past that, but it is seconds there. A table a VACUUM is working on
    is skipped (its VACUUM is not cancelled); autovacuum analyses it later.
    """
    if chunks_written <= 0:
        return False
    stored = collection_chunks(session, collection)
    if chunks_written < REFRESH_SHARE * stored or stored == 0:  # emptied: no rows, and no partitions, to analyse
        return False
    small = stored < PLANNED_MIN_CHUNKS and stored < PLANNED_TABLE_SHARE * float(session.scalar(_TABLE_ROWS) or 0)
    if is_partitioned(session.connection()):
        statement = session.execute(_PARTITIONS_ANALYZE if small else _PARTITIONED_ANALYZE, {"c": collection})
        session.execute(text(statement.scalar_one()))
        return not small
    if small:
        return False
    session.execute(text(_ANALYZE))
    return True


# partitioned by collection (``db.partitions``), the collection's own partitions are analysed, quoted by the server
# (named as ``rag_ensure_collection_partitions`` names them): an ANALYZE of a partitioned parent analyses every
# partition, every collection's, so each new collection's ingest took longer than the last (0.55 s for the first of
# 300 small collections, 1.06 s at the 150th, ANALYZE most of it)
_PARTITIONS_ANALYZE = text(
    "SELECT format('ANALYZE (SKIP_LOCKED) %I, %I, %I', 'documents_' || md5(CAST(:c AS text)), "
    "'document_chunks_' || md5(CAST(:c AS text)), 'chunk_terms_' || md5(CAST(:c AS text)))"
)
_PARTITIONED_ANALYZE = text(
    "SELECT format('ANALYZE (SKIP_LOCKED) %I, %I, %I, lexeme_stats, document_contexts, context_terms, chunk_edges', "
    "'documents_' || md5(CAST(:c AS text)), 'document_chunks_' || md5(CAST(:c AS text)), "
    "'chunk_terms_' || md5(CAST(:c AS text)))"
)
# and the VACUUM after it reads the collection's postings partition, not every collection's (SKIP_LOCKED and
# INDEX_CLEANUP AUTO as ``_ANALYZE`` and ``_VACUUM``)
_PARTITIONED_VACUUM = text(
    "SELECT format('VACUUM (INDEX_CLEANUP AUTO, SKIP_LOCKED) %I, lexeme_stats, document_contexts, context_terms, "
    "chunk_edges', 'chunk_terms_' || md5(CAST(:c AS text)))"
)


def refresh_after_graph_rebuild(session: Session) -> None:
    """``ANALYZE`` the edges after a collection's graph was rebuilt (all its edges are new rows)."""
    session.execute(text(_ANALYZE_GRAPH))


def settle_after_write(db: Database, collection: str | None = None) -> None:
    """``VACUUM`` the tables read index-only after a run that ``refresh_after_write`` analysed (a new or largely
    rewritten collection), so its first queries do not fetch every row they read; a table another VACUUM holds is
    skipped, not waited for. Partitioned, ``collection``'s postings partition only (every one without it)."""
    statement = _VACUUM
    if collection is not None and db.read(lambda session: is_partitioned(session.connection())):
        statement = db.read(lambda session: str(session.execute(_PARTITIONED_VACUUM, {"c": collection}).scalar_one()))
    vacuum(db, statement)


def vacuum(db: Database, statement: str) -> bool:
    """Run a ``VACUUM`` ``statement`` on a connection of its own, without the statement timeout; False (nothing
    run) inside a test's transaction, where VACUUM cannot run."""
    if db.is_bound:
        return False
    with database_errors(db.engine), db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SET statement_timeout = 0"))  # VACUUM runs outside a transaction: no SET LOCAL
        try:
            conn.execute(text(statement))
        finally:
            conn.execute(text("RESET statement_timeout"))  # back to the pool with the engine's own
    return True
