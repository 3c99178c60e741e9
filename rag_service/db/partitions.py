"""LIST partitions by collection: ``rag db upgrade --partition-by-collection``.

``documents``, ``document_chunks`` and ``chunk_terms`` become tables partitioned by ``collection``
(possible since migration 0005 put ``collection`` first in every key), each collection its own
partition with its own HNSW, GIN and postings indexes (pgvector's "Multitenancy": no recall lost to
other tenants' vectors, and dropping a tenant is dropping its partitions). ``lexeme_stats``,
``collection_stats`` and the contexts (``document_contexts``, ``context_terms``, ``context_stats``) stay
plain tables keyed by collection: the statistics are small, and a collection's contexts hold fewer rows
than its chunks' postings.

A collection's partitions are created when it first gets data (``prepare_collection``, called by
ingestion before it writes; creating a partition briefly locks the parent tables, once per
collection). The BM25 statistics are kept by the same statement-level triggers as on one plain
table: PostgreSQL runs them on the partitioned parents with transition tables, including the
cascade from ``documents``. The tables are converted only while they are empty: the option is for
a new database (index the data afterwards).
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, MetaData, Table, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from rag_service.db.models import ChunkTerm, ContextTerm, Document, DocumentChunk, DocumentContext
from rag_service.errors import SchemaError

_log = logging.getLogger(__name__)

#: partitions are named <table>_<md5 of the collection>: any collection name gives a valid identifier
PARTITION_NAME_PATTERN = r"^(documents|document_chunks|chunk_terms)_[0-9a-f]{32}$"

_ENSURE_PARTITIONS = """
CREATE OR REPLACE FUNCTION rag_ensure_collection_partitions(c text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['documents', 'document_chunks', 'chunk_terms'] LOOP
        IF to_regclass(quote_ident(t || '_' || md5(c))) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (%L)', t || '_' || md5(c), t, c);
        END IF;
    END LOOP;
END $$
"""

# migration 0010's storage of the vectors, on the rebuilt parent (its partitions take it from there)
_INLINE_VECTORS = "ALTER TABLE document_chunks ALTER COLUMN embedding SET STORAGE MAIN"

#: migration 0014's row triggers recording packed postings' tombstones (``db.packed_postings``), on the partitioned
#: parent; the conversion had left them out until migration 0017 (its function is kept from the migration)
PACKED_TRIGGERS = {
    "document_chunks_packed_delete": "CREATE TRIGGER document_chunks_packed_delete AFTER DELETE ON document_chunks "
    "FOR EACH ROW EXECUTE FUNCTION rag_packed_tombstone_row()",
    "document_chunks_packed_update": "CREATE TRIGGER document_chunks_packed_update AFTER UPDATE OF content_tsv "
    "ON document_chunks FOR EACH ROW EXECUTE FUNCTION rag_packed_tombstone_row()",
}

# the triggers of migrations 0002/0005 and 0014, on the partitioned parent (functions are kept from the migrations)
_TRIGGERS = (
    "CREATE TRIGGER document_chunks_lexeme_count BEFORE INSERT OR UPDATE OF content_tsv ON document_chunks "
    "FOR EACH ROW EXECUTE FUNCTION rag_chunk_lexeme_count()",
    "CREATE TRIGGER document_chunks_stats_insert AFTER INSERT ON document_chunks "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_chunk_stats()",
    "CREATE TRIGGER document_chunks_stats_delete AFTER DELETE ON document_chunks "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_chunk_stats()",
    "CREATE TRIGGER document_chunks_stats_update AFTER UPDATE ON document_chunks "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_chunk_stats()",
    *PACKED_TRIGGERS.values(),
)

_HAS_TRIGGER = "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'document_chunks'::regclass AND tgname = :name)"

# migration 0013's row trigger counting the contexts (its function is kept from the migration)
_CONTEXT_TRIGGER = (
    "CREATE TRIGGER document_contexts_stats AFTER INSERT OR DELETE ON document_contexts "
    "FOR EACH ROW EXECUTE FUNCTION rag_context_stats_row()"
)

_DROP_TABLES = (
    "DROP TABLE context_terms",
    "DROP TABLE document_contexts",
    "DROP TABLE chunk_terms",
    "DROP TABLE document_chunks",
    "DROP TABLE documents",
)


def is_partitioned(connection: Connection) -> bool:
    """True when ``documents`` is a partitioned table."""
    kind = connection.execute(text("SELECT relkind FROM pg_class WHERE oid = to_regclass('documents')")).scalar()
    return kind == "p"


def partition_by_collection(connection: Connection) -> bool:
    """Rebuild the (empty) document, chunk and posting tables partitioned by collection; returns False
    when they already are. SchemaError when they hold rows or the database is a Citus coordinator."""
    if is_partitioned(connection):
        return False
    if connection.execute(text("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")).scalar_one():
        raise SchemaError("--partition-by-collection is for one node; Citus already distributes by collection")
    held = connection.execute(text("SELECT count(*) FROM documents")).scalar_one()
    if held:
        raise SchemaError(
            f"--partition-by-collection converts empty tables only, and documents holds {held} rows: "
            "run it on a new database, then index your data into it"
        )
    for statement in _DROP_TABLES:
        connection.execute(text(statement))
    partitioned = MetaData()
    for model in (Document, DocumentChunk, ChunkTerm):
        table = model.__table__
        assert isinstance(table, Table)
        copy = table.to_metadata(partitioned)
        copy.dialect_options["postgresql"]["partition_by"] = "LIST (collection)"
    partitioned.create_all(connection)
    for plain in (DocumentContext, ContextTerm):  # one row per section: plain tables, referring to the partitioned
        table = plain.__table__
        assert isinstance(table, Table)
        table.create(connection)
    connection.execute(text(_CONTEXT_TRIGGER))
    connection.execute(text(_INLINE_VECTORS))
    for statement in _TRIGGERS:
        connection.execute(text(statement))
    connection.execute(text(_ENSURE_PARTITIONS))
    return True


def prepare_collection(session: Session, collection: str) -> None:
    """Create ``collection``'s partitions if the tables are partitioned and it has none yet."""
    ensure = session.execute(text("SELECT to_regproc('rag_ensure_collection_partitions')")).scalar()
    if ensure is not None:
        session.execute(text("SELECT rag_ensure_collection_partitions(:c)"), {"c": collection})


#: the longest an emptied collection's partitions wait for the parents' lock (queries of other collections hold it
#: shared); past it they stay, empty and harmless, until the collection is emptied again
DROP_LOCK_WAIT = "2s"
_PARTITIONS = ("chunk_terms", "document_chunks", "documents")  # referencing tables first
_EMPTY_PARTITION = text(
    "SELECT to_regclass(quote_ident('documents_' || md5(:c))) IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM documents WHERE collection = :c)"
)
_LOCK_NOT_AVAILABLE = "55P03"
# the statements dropping a collection's partition of a table, quoted by the server (a partition's name is the
# table's and the md5 of the collection, as rag_ensure_collection_partitions names it)
_DROP_PARTITION = text(
    "SELECT format(s, CAST(:table AS text), CAST(:table AS text) || '_' || md5(CAST(:c AS text))) FROM unnest(ARRAY["
    "'ALTER TABLE %I DETACH PARTITION %I', 'DROP TABLE %2$I']) WITH ORDINALITY AS u(s, n) ORDER BY n"
)


def drop_if_empty(session: Session, collection: str) -> bool:
    """Drop ``collection``'s partitions when the tables are partitioned and it holds no document any more (its
    last one deleted or pruned); True when dropped. The caller holds the collection's reindex lock, so no run
    writes into them meanwhile. A drop that cannot get the parents' lock within ``DROP_LOCK_WAIT`` leaves them (the
    wait holds to the end of ``session``'s transaction: give it one of its own)."""
    if not is_partitioned(session.connection()) or not session.execute(_EMPTY_PARTITION, {"c": collection}).scalar():
        return False
    try:
        with session.begin_nested():
            session.execute(text("SELECT set_config('lock_timeout', :wait, true)"), {"wait": DROP_LOCK_WAIT})
            for table in _PARTITIONS:  # detached first: the foreign keys to the parents hold each partition
                for statement in session.execute(_DROP_PARTITION, {"table": table, "c": collection}).scalars():
                    session.execute(text(statement))
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
            raise
        _log.warning("collection %r is empty; its partitions stay (the tables were busy): %s", collection, exc.orig)
        return False
    return True


def add_packed_triggers(connection: Connection) -> list[str]:
    """Create the packed postings' tombstone triggers a partitioned ``document_chunks`` lacks (one converted
    before migration 0017); returns their names. Nothing on a plain table (migration 0014 made them) or Citus."""
    if not is_partitioned(connection):
        return []
    missing = [name for name in PACKED_TRIGGERS if not connection.execute(text(_HAS_TRIGGER), {"name": name}).scalar()]
    for name in missing:
        connection.execute(text(PACKED_TRIGGERS[name]))
    return missing
