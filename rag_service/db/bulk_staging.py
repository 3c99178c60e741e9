"""Where a bulk load stages its chunks, and their tokenizing on PostgreSQL's parallel workers.

The staged chunks (``bulk_chunks``) and their tsvectors (``bulk_vectors``: seq, tsv) live in
unlogged tables of a schema of the load's own, put first in the transaction's ``search_path``, because
parallel workers cannot read a temporary table: the chunks are then tokenized once, in a query the
workers share, and every later statement reads the tsvectors (``db.bulk``). A role that may not create
a schema stages in temporary tables instead (the tokenizing then runs on one process). Either way the
tables vanish with the load: dropped at its end, or rolled back with its transaction.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from psycopg.sql import SQL, Identifier
from sqlalchemy import Connection, TextClause, text
from sqlalchemy.orm import Session

from rag_service.db.local_settings import local_settings

_STAGE_DEFINITION = (
    "bulk_chunks (seq bigint PRIMARY KEY, document_id bigint NOT NULL, chunk_index integer, chunk_type text, "
    "content text, parent_content text, parent_start integer, parent_end integer, headers jsonb, header_path text, "
    "start_char integer, end_char integer, token_count integer, content_hash text, embedding vector, "
    "search_prefix text, metadata jsonb)"
)
_CAN_CREATE_SCHEMA = text("SELECT has_database_privilege(current_database(), 'CREATE')")
_SEARCH_PATH = text("SELECT current_setting('search_path')")
_SET_SEARCH_PATH = text("SELECT set_config('search_path', :path, true)")

#: the text a chunk's tsvector (and its postings) is made of, ``b`` a staged chunk
CHUNK_TSV = "to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text(b.search_prefix || E'\\n' || b.content))"
# each staged chunk's tsvector: a plain projection, which the workers compute (a lateral subquery, or the
# length beside it, would run in the leader only: 9.0 s at 100k against 3.7 here)
_VECTORS_SELECT = "SELECT b.seq, " + CHUNK_TSV + " AS tsv FROM bulk_chunks b"  # noqa: S608 (constants only)
_CREATE_STAGE_UNLOGGED_SQL = "CREATE UNLOGGED TABLE " + _STAGE_DEFINITION
_CREATE_STAGE_TEMP_SQL = "CREATE TEMP TABLE " + _STAGE_DEFINITION + " ON COMMIT DROP"
_CREATE_STAGE_UNLOGGED, _CREATE_STAGE_TEMP = text(_CREATE_STAGE_UNLOGGED_SQL), text(_CREATE_STAGE_TEMP_SQL)


@dataclass(frozen=True, slots=True)
class StagedTable:
    """A staging table made by a query: its two statements (unlogged in the load's schema, or temporary)."""

    unlogged: TextClause
    temporary: TextClause


def staged_table(name: str, select: str) -> StagedTable:
    """``CREATE ... name AS select`` both ways; for module constants only (built once, at import)."""
    unlogged = f"CREATE UNLOGGED TABLE {name} AS {select}"
    temporary = f"CREATE TEMP TABLE {name} ON COMMIT DROP AS {select}"
    return StagedTable(text(unlogged), text(temporary))


_VECTORS = staged_table("bulk_vectors", _VECTORS_SELECT)
_VECTORS_KEY = text("ALTER TABLE bulk_vectors ADD PRIMARY KEY (seq)")

# the planner prices to_tsvector at 100 operators, far below a section's real cost, and plans the tokenizing
# serially; told that parallel work is free it runs it on the workers (set for that statement only)
_PARALLEL_FREE = dict.fromkeys(("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"), "0")
def run_with_settings(
    session: Session | Connection, statement: Any, params: dict[str, Any], settings: dict[str, str]
) -> Any:
    """Run ``statement`` with these settings (name: value) for it alone, restored after it; its result."""
    with local_settings(session, settings):
        return session.execute(statement, params)


def run_in_parallel(session: Session | Connection, statement: Any, params: dict[str, Any], **settings: str) -> Any:
    """Run ``statement`` (a query PostgreSQL may parallelise) with parallel work priced as free (and
    ``settings``, e.g. ``work_mem``, for it alone); its result."""
    return run_with_settings(session, statement, params, {**_PARALLEL_FREE, **settings})


class Staging:
    """A load's staging tables in ``session``'s transaction: ``create``, ``tokenize``, then ``drop``."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.schema: str | None = None  # None: temporary tables
        self._search_path = ""

    def create(self) -> None:
        """Create ``bulk_chunks``: unlogged in a new schema when the role may create one, else temporary."""
        if self.session.execute(_CAN_CREATE_SCHEMA).scalar_one():
            self.schema = f"rag_bulk_{secrets.token_hex(6)}"
            self._search_path = str(self.session.execute(_SEARCH_PATH).scalar_one())
            self.run(SQL("CREATE SCHEMA {}").format(Identifier(self.schema)))
            path = SQL("{}, ").format(Identifier(self.schema)).as_string(self._raw()) + self._search_path
            self.session.execute(_SET_SEARCH_PATH, {"path": path})
            self.session.execute(_CREATE_STAGE_UNLOGGED)
        else:
            self.session.execute(_CREATE_STAGE_TEMP)

    def create_as(
        self,
        table: StagedTable,
        params: dict[str, Any],
        *,
        parallel: bool = False,
        settings: dict[str, str] | None = None,
    ) -> None:
        """Stage ``table`` beside ``bulk_chunks``; ``parallel``: its query is worth running on parallel
        workers (where the staging allows them); ``settings`` (name: value) hold for that query alone."""
        settings = settings or {}
        if self.schema is None:
            run_with_settings(self.session, table.temporary, params, settings)
        elif parallel:
            run_in_parallel(self.session, table.unlogged, params, **settings)
        else:
            run_with_settings(self.session, table.unlogged, params, settings)

    def tokenize(self, fts_config: str) -> None:
        """``bulk_vectors``: every staged chunk's tsvector, keyed by ``seq``."""
        self.create_as(_VECTORS, {"fts_config": fts_config}, parallel=True)
        self.session.execute(_VECTORS_KEY)
        self.session.execute(text("ANALYZE bulk_chunks, bulk_vectors"))

    def drop(self) -> None:
        """Drop the load's schema and restore the ``search_path`` (temporary tables go at commit)."""
        if self.schema is not None:
            self.session.execute(_SET_SEARCH_PATH, {"path": self._search_path})
            self.run(SQL("DROP SCHEMA {} CASCADE").format(Identifier(self.schema)))
            self.schema = None

    def _raw(self) -> Any:
        return self.session.connection().connection.driver_connection

    def run(self, statement: Any) -> None:
        """Run a composed psycopg statement (DDL naming the load's schema) in the load's transaction."""
        with self._raw().cursor() as cursor:
            cursor.execute(statement)
