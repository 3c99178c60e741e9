"""Citus: the tables distributed by ``collection``, co-located, with row-level BM25 triggers.

``rag db upgrade`` calls ``distribute`` after the migrations; it does nothing unless the database has
the ``citus`` extension (a Citus coordinator), and nothing for tables already distributed, so it is
safe to run again. One collection is one shard group: every search and every write of a collection
is a single-shard router query, since every statement carries ``collection =`` (migration 0005).

Two things differ from one node:

* the BM25 statistics come from the row-level trigger ``rag_chunk_stats_row()`` (migration 0005):
  Citus cannot run the statement-level triggers with transition tables on shards, and a trigger on
  a shard may only touch co-located shards of the same collection, which the row trigger does;
* triggers on distributed tables need ``citus.enable_unsafe_triggers`` while they are created; it is
  set for the upgrade's transaction only.

The shard count is Citus' own ``citus.shard_count`` (default 32); set it before the first upgrade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, TextClause, text
from sqlalchemy.orm import Session

#: distributed by collection in this order (documents first: the chunks' foreign key refers to it)
DISTRIBUTED_TABLES = (
    "documents",
    "document_chunks",
    "chunk_terms",
    "lexeme_stats",
    "collection_stats",
    "chunk_edges",  # the chunk graph (migration 0006), read with the chunks
    "chunk_links",
    "document_contexts",  # the context BM25 (migration 0013)
    "context_terms",
    "context_stats",
)

_DROP_TRIGGERS = (
    "DROP TRIGGER IF EXISTS document_chunks_stats_insert ON document_chunks",
    "DROP TRIGGER IF EXISTS document_chunks_stats_delete ON document_chunks",
    "DROP TRIGGER IF EXISTS document_chunks_stats_update ON document_chunks",
    "DROP TRIGGER IF EXISTS document_chunks_stats_row ON document_chunks",
    # packed postings' tombstones (migration 0014) write a local table: no snapshots on Citus
    "DROP TRIGGER IF EXISTS document_chunks_packed_delete ON document_chunks",
    "DROP TRIGGER IF EXISTS document_chunks_packed_update ON document_chunks",
)

_ROW_TRIGGER = (
    "CREATE TRIGGER document_chunks_stats_row AFTER INSERT OR UPDATE OR DELETE ON document_chunks "
    "FOR EACH ROW EXECUTE FUNCTION rag_chunk_stats_row()"
)


_HAS_CITUS = "rag_service.has_citus"


def has_citus(connection: Connection) -> bool:
    """True when the database has the citus extension (we are on a Citus coordinator). Read once per database
    connection (``Connection.info`` lives as long as it): the extension is created before `rag db upgrade`
    distributes the tables, and ``distribute`` reads it afresh."""
    known = connection.info.get(_HAS_CITUS)
    if known is None:
        known = _read_has_citus(connection)
    return bool(known)


def _read_has_citus(connection: Connection) -> bool:
    found = connection.execute(text("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")).scalar_one()
    connection.info[_HAS_CITUS] = bool(found)
    return bool(found)


def distributed_tables(connection: Connection) -> set[str]:
    """Our tables already distributed (empty without Citus)."""
    if not _read_has_citus(connection):
        return set()
    rows = connection.execute(
        text("SELECT logicalrelid::regclass::text FROM pg_dist_partition WHERE logicalrelid::regclass::text = ANY(:t)"),
        {"t": list(DISTRIBUTED_TABLES)},
    )
    return {name for (name,) in rows}


def use_row_level_stats(connection: Connection) -> None:
    """Keep the BM25 statistics with the row-level trigger instead of the statement-level ones.

    Both give identical statistics (``tests/integration/test_citus.py`` compares them); the row
    trigger is what Citus can run. Idempotent.
    """
    for statement in _DROP_TRIGGERS:
        connection.execute(text(statement))
    connection.execute(text(_ROW_TRIGGER))


def distribute(connection: Connection) -> list[str]:
    """On a Citus coordinator, distribute our tables by collection, co-located; returns the tables
    distributed now (none when Citus is absent or all already are)."""
    if not _read_has_citus(connection):
        return []
    done = distributed_tables(connection)
    todo = [t for t in DISTRIBUTED_TABLES if t not in done]
    if not todo:
        return []
    connection.execute(text("SET LOCAL citus.enable_unsafe_triggers = on"))
    connection.execute(text("SET LOCAL citus.multi_shard_modify_mode = 'sequential'"))
    if "document_chunks" in todo:
        use_row_level_stats(connection)
    for table in todo:
        colocate = "default" if table == DISTRIBUTED_TABLES[0] else DISTRIBUTED_TABLES[0]
        connection.execute(
            text("SELECT create_distributed_table(:t, 'collection', colocate_with => :c)"),
            {"t": table, "c": colocate},
        )
    return todo


def insert_columns(
    session: Session | Connection,
    insert: TextClause,
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    **fixed: Any,
) -> int:
    """Run ``insert``, an ``INSERT ... SELECT FROM unnest(:name arrays)``, with ``rows`` passed as one array per
    column (``names`` in row order) plus the ``fixed`` parameters; returns the rows inserted. On Citus this writes a
    collection's rows single-shard, after a router SELECT read them: a data-modifying CTE doing both sends its
    intermediate results to every worker, so one worker down would fail every collection's write."""
    if not rows:
        return 0
    arrays = {name: [row[i] for row in rows] for i, name in enumerate(names)}
    return int(session.execute(insert, {**fixed, **arrays}).rowcount)  # type: ignore[attr-defined]
