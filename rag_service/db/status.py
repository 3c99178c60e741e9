"""What ``rag db status`` reports: server, extension, migration state, stored model, counts, memory, sizes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from rag_service.db.database import as_database_error, failed_node
from rag_service.db.layout import Layout, citus_sizes, read_layout
from rag_service.db.messages import url_for_display
from rag_service.db.migrate import current_revision, head_revision, newer_schema_error
from rag_service.db.shared_memory import SharedMemory, read_shared_memory
from rag_service.errors import SchemaError
from rag_service.terminal import one_line

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DatabaseStatus:
    """A snapshot of the database's state."""

    url: str
    server_version: str
    pgvector_version: str | None
    revision: str | None
    head: str
    embedding_model: str | None
    embedding_dim: int | None
    fts_config: str | None
    collections: dict[str, tuple[int, int]]  # collection -> (documents, chunks)
    #: the service's tables and indexes, largest first: (kind "table" or "index <method>", name, bytes)
    sizes: tuple[tuple[str, str, int], ...] = ()
    #: the model an unfinished ``rag reindex --all`` is switching the vectors to (migration 0008), else None
    switching_to: str | None = None
    #: that switch is to another dimension: the vector indexes are dropped until it ends (migration 0018)
    resizing: bool = False
    #: the rag_bm25 extension (``ext/rag_bm25``): its version in this database, "available" (in the server, not
    #: created yet: the first large collection creates it) or None (not in the server)
    rag_bm25: str | None = None
    #: the collections whose postings are packed (``db.packed_postings``): their BM25 arm is the extension's
    packed: frozenset[str] = frozenset()
    #: the server's shared memory (``SharedMemory``), None when not read
    memory: SharedMemory | None = None
    #: how the tables are laid out (``db.layout``): one node, partitioned, Citus; None when not read
    layout: Layout | None = None
    #: what could not be read, one line each (a Citus worker down fails what reaches its shards)
    unread: tuple[str, ...] = ()

    @property
    def up_to_date(self) -> bool:
        """True when the schema is at the code's newest migration."""
        return self.revision == self.head

    def lines(self) -> list[str]:
        """Human-readable report lines."""
        out = [
            f"database:   {self.url}",
            f"server:     {self.server_version}",
            f"pgvector:   {self.pgvector_version or 'not installed (run `rag db upgrade`)'}",
            f"schema:     {self.revision or 'empty'} (head {self.head}){self._schema_advice()}",
        ]
        stored_nothing = not self.unread and not any(chunks for _, chunks in self.collections.values())
        if self.embedding_model and stored_nothing and not self.switching_to:  # db.index_settings._abandoned
            out.append(
                f"embeddings: none stored yet ({self.embedding_model} was recorded by a write that stored nothing; "
                "the next write records its own)"
            )
        elif self.embedding_model:
            out.append(f"embeddings: {self.embedding_model} ({self.embedding_dim}-d), fts '{self.fts_config}'")
            if self.switching_to:
                out.append(
                    f"switch:     from {self.embedding_model} to {self.switching_to} unfinished (reads and writes "
                    f"refuse); run `rag reindex --all` with {self.switching_to} to finish it"
                    + (" (another dimension: the HNSW index is rebuilt when it ends)" if self.resizing else "")
                )
        else:
            out.append("embeddings: none stored yet")
        if self.layout is not None:
            out.append(f"layout:     {self.layout.line}")
        out.extend(f"unread:     {line}" for line in self.unread)
        if not self.collections and not self.unread:
            out.append("documents:  none")
        if self.layout is not None and self.layout.citus:
            out.append(
                "rag_bm25:   not used on Citus (packed postings are not distributed): every collection uses the "
                "bounded BM25 arm"
            )
        elif self.rag_bm25 is None:
            out.append(
                "rag_bm25:   not in this server: large collections use the bounded BM25 arm and bulk loads rank "
                "keywords in SQL (`make install`)"
            )
        else:
            out.append(f"rag_bm25:   {self.rag_bm25} (exact BM25 for large collections, bulk keywords in one pass)")
        for name, (docs, chunks) in sorted(self.collections.items()):
            packed = ", postings packed (exact BM25)" if name in self.packed else ""
            counts = f"{docs} document{'' if docs == 1 else 's'}, {chunks} chunk{'' if chunks == 1 else 's'}"
            out.append(f"collection: {one_line(name)}: {counts}{packed}")  # a name's ESC or newline, shown
        if self.memory is not None:
            out.append(f"memory:     {self.memory.describe(data_bytes=sum(size for _, _, size in self.sizes))}")
        for kind, name, size in self.sizes:  # what shared_buffers should hold (README, "Your own PostgreSQL")
            out.append(f"size:       {name} ({kind}): {_pretty(size)}")
        return out

    def _schema_advice(self) -> str:
        if self.up_to_date:
            return ""
        if newer_schema_error(self.revision, url=self.url) is not None:
            return " - newer than this release (a newer rag_service migrated it): upgrade rag_service"
        return " - run `rag db upgrade`"


def _pretty(size: int) -> str:
    """Bytes in the units of PostgreSQL's pg_size_pretty (kB, MB, GB: powers of 1024)."""
    value = float(size)
    for unit in ("bytes", "kB", "MB"):
        if value < 10 * 1024:
            return f"{value:.0f} {unit}" if unit != "MB" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


#: the tables of the service whose sizes ``rag db status`` shows, with their indexes
_SIZED_TABLES = (
    "documents",
    "document_chunks",
    "chunk_terms",
    "lexeme_stats",
    "chunk_edges",
    "chunk_links",
    "bm25_packed_lists",
)

# each table without its indexes, then each index; a partitioned one summed over its partitions
_SIZES_SQL = text(
    "SELECT 'table', t.relname, CASE WHEN t.relkind = 'p' THEN "
    "(SELECT coalesce(sum(pg_table_size(p.relid)), 0) FROM pg_partition_tree(t.oid) p) "
    "ELSE pg_table_size(t.oid) END "
    "FROM pg_class t WHERE t.relname = ANY(:tables) AND t.relkind IN ('r', 'p') AND NOT t.relispartition "
    "AND t.relnamespace = current_schema()::regnamespace "
    "UNION ALL "
    "SELECT 'index ' || am.amname, ic.relname, CASE WHEN ic.relkind = 'I' THEN "
    "(SELECT coalesce(sum(pg_relation_size(p.relid)), 0) FROM pg_partition_tree(ic.oid) p) "
    "ELSE pg_relation_size(ic.oid) END "
    "FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid "
    "JOIN pg_am am ON am.oid = ic.relam "
    "WHERE t.relname = ANY(:tables) AND NOT t.relispartition AND t.relnamespace = current_schema()::regnamespace "
    "ORDER BY 3 DESC, 2"
)


def read_status(engine: Engine) -> DatabaseStatus:
    """Collect the status; works on an empty (unmigrated) database too. What reaches a Citus worker that does not
    answer (the collections, the sizes) is an ``unread`` line; the rest is still read."""
    unread: list[str] = []
    with engine.connect() as conn:
        version = conn.execute(text("SHOW server_version")).scalar_one()
        vector = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
        revision = current_revision(conn)
        model = dim = cfg = switching_to = None
        resizing = False
        collections: dict[str, tuple[int, int]] = {}
        sizes: tuple[tuple[str, str, int], ...] = ()
        packed: frozenset[str] = frozenset()
        memory = read_shared_memory(conn)
        layout = read_layout(conn)
        rag_bm25 = conn.execute(
            text(
                "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'rag_bm25'), "
                "(SELECT 'available' FROM pg_available_extensions WHERE name = 'rag_bm25'))"
            )
        ).scalar()
        if revision is not None:
            settings_row = conn.execute(  # read through jsonb: absent below migrations 0008 and 0018
                text(
                    "SELECT embedding_model, embedding_dim, fts_config, to_jsonb(s) ->> 'switching_to', "
                    "jsonb_typeof(to_jsonb(s) -> 'vector_indexes') = 'array' FROM index_settings s WHERE id = 1"
                )
            ).first()
            if settings_row is not None:
                model, dim, cfg, switching_to, resizing = settings_row
            if conn.execute(text("SELECT to_regclass('bm25_packed_snapshots')")).scalar() is not None:
                ready = conn.execute(text("SELECT collection FROM bm25_packed_snapshots WHERE ready"))
                packed = frozenset(str(name) for (name,) in ready)
            if layout.citus:  # each on a connection of its own: a worker down fails only its part
                collections = _apart(engine, _collections, "collections", unread) or {}
                sizes = _apart(engine, citus_sizes, "sizes", unread) or ()
            else:
                collections, sizes = _collections(conn), _local_sizes(conn)
    return DatabaseStatus(
        url=url_for_display(engine),
        server_version=str(version),
        pgvector_version=vector,
        revision=revision,
        head=head_revision(),
        embedding_model=model,
        embedding_dim=dim,
        fts_config=cfg,
        collections=collections,
        sizes=sizes,
        switching_to=switching_to,
        resizing=bool(resizing),
        rag_bm25=rag_bm25,
        packed=packed,
        memory=memory,
        layout=layout,
        unread=tuple(unread),
    )


def _collections(conn: Connection) -> dict[str, tuple[int, int]]:
    rows = conn.execute(
        text(
            "SELECT d.collection, count(DISTINCT d.id), coalesce(sum(d.chunk_count), 0) "
            "FROM documents d GROUP BY d.collection"
        )
    )
    return {str(name): (int(docs), int(chunks)) for name, docs, chunks in rows}


def _local_sizes(conn: Connection) -> tuple[tuple[str, str, int], ...]:
    rows = conn.execute(_SIZES_SQL, {"tables": list(_SIZED_TABLES)})
    return tuple((str(kind), str(name), int(size)) for kind, name, size in rows)


def _apart(engine: Engine, read: Callable[[Connection], T], what: str, unread: list[str]) -> T | None:
    """``read`` on a connection of its own (on Citus a worker failing in a transaction fails the rest of it);
    None, and a line in ``unread``, when a node it reaches does not answer."""
    try:
        with engine.connect() as conn:
            return read(conn)
    except DBAPIError as exc:
        if failed_node(exc) is None:
            raise
        unread.append(f"{what}: {as_database_error(exc, url=url_for_display(engine))}")
        return None


def schema_is_current(engine: Engine) -> bool:
    """True when the database is migrated to the code's newest revision."""
    with engine.connect() as conn:
        return current_revision(conn) == head_revision()


def require_current_schema(engine: Engine) -> None:
    """Raise SchemaError unless the database is migrated to head."""
    with engine.connect() as conn:
        revision = current_revision(conn)
    head = head_revision()
    newer = newer_schema_error(revision, url=url_for_display(engine))
    if newer is not None:
        raise newer
    if revision != head:
        raise SchemaError(
            f"the database schema is at {revision or 'nothing'} but this code needs {head}; run `rag db upgrade`"
        )
