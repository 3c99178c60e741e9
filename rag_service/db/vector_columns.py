"""The vector columns' dimension: an empty database's sized to its first model, a populated one's changed by a switch.

The migrations create the vector columns with ``SCHEMA_EMBEDDING_DIM`` (384: the bundled MiniLM's) dimensions, so a
model of another size (``RAG_EMBEDDING_MODEL``: bge-base and mpnet make 768) was refused by every database, a new one
included. A database that holds no vector yet takes the dimension of the model that writes first
(``fit_vector_columns``). One that holds vectors changes it only through ``rag reindex --all`` (``db.model_switch``):
``open_vector_columns`` makes the columns dimensionless for the switch, so a document that fails keeps its old vectors
beside the re-embedded ones (reads refuse meanwhile), and ``close_vector_columns`` gives them the new dimension once
every vector is the new model's. pgvector's HNSW index needs a dimension, so the vector indexes are dropped for the
switch, their definitions kept in ``index_settings.vector_indexes`` (migration 0018), and rebuilt at its end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.sql import SQL, Identifier, Literal
from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.db.bulk import index_memory
from rag_service.errors import EmbeddingMismatchError, SchemaError

#: pgvector's HNSW index takes ``vector`` columns of at most this many dimensions
HNSW_MAX_DIMENSIONS = 2000

#: every column holding a model's vectors (chunks, and the contexts' mean vectors of migration 0015)
VECTOR_TABLES = ("document_chunks", "document_contexts")

_COLUMN_DIMENSION = text(
    "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('document_chunks') AND attname = 'embedding'"
)
_TABLES = SQL(", ").join(Identifier(table) for table in VECTOR_TABLES)
_LOCK = SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(_TABLES)
_HOLDS_VECTORS = SQL("SELECT {}").format(
    SQL(" OR ").join(SQL("EXISTS (SELECT 1 FROM {})").format(Identifier(table)) for table in VECTOR_TABLES)
)
_RESIZE = SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE vector({})")
_OPEN = SQL("ALTER TABLE {} ALTER COLUMN embedding TYPE vector")
#: ``atttypmod`` of a column without a dimension
_NO_DIMENSION = -1
#: every index reading a vector column (a column's or an expression's): pg_depend lists each with the column
_VECTOR_INDEXES = text(
    "SELECT DISTINCT d.objid::regclass::text, pg_get_indexdef(d.objid) FROM pg_depend d "
    "JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid "
    "JOIN pg_class i ON i.oid = d.objid AND i.relkind IN ('i', 'I') "
    "WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass "
    "AND d.refobjid = ANY(CAST(:tables AS regclass[])) AND a.attname = 'embedding' ORDER BY 1"
)
_KEEP_INDEXES = text("UPDATE index_settings SET vector_indexes = :definitions WHERE id = 1")
_KEPT_INDEXES = text("SELECT vector_indexes FROM index_settings WHERE id = 1")
_CLOSED = text("UPDATE index_settings SET vector_indexes = NULL, embedding_dim = :dim WHERE id = 1")
_CHUNKS = text("SELECT count(*) FROM document_chunks")


def schema_embedding_dim(session: Session) -> int | None:
    """The dimension of the ``document_chunks.embedding`` column (the migrations', or the first write's); None
    while a switch to a model of another dimension has the columns open (``open_vector_columns``)."""
    dim = session.execute(_COLUMN_DIMENSION).scalar()
    if dim is None:
        raise SchemaError("the database has no document_chunks table; run `rag db upgrade` first")
    return int(dim) if dim != _NO_DIMENSION else None


def fit_vector_columns(session: Session, *, model_id: str, dim: int) -> None:
    """Give the vector columns ``dim`` dimensions when no table holds a vector yet (the first write's transaction).

    The tables are locked first, so two first writes with different models cannot both pass: the second sees the
    first one's rows (or its dimension) and is refused by the dimension check after this. Their HNSW indexes are
    rebuilt by the ALTER, at no cost on empty tables.
    """
    if schema_embedding_dim(session) == dim:
        return
    check_hnsw_limit(model_id=model_id, dim=dim)
    raw: Any = session.connection().connection.driver_connection  # composed by psycopg: a typmod takes no parameter
    with raw.cursor() as cursor:
        cursor.execute(_LOCK)
        if schema_embedding_dim(session) == dim or cursor.execute(_HOLDS_VECTORS).fetchone()[0]:
            return
        for table in VECTOR_TABLES:
            cursor.execute(_RESIZE.format(Identifier(table), Literal(int(dim))))


def open_vector_columns(session: Session, *, model_id: str, dim: int) -> None:
    """Make the vector columns dimensionless for a switch to a ``dim``-d model (the switch's first transaction).

    The vector indexes are dropped (pgvector's HNSW needs a dimension) and their definitions kept in
    ``index_settings.vector_indexes`` for ``close_vector_columns``. No row is rewritten: only the column's type
    modifier changes. Columns already open (an unfinished switch) are left as they are.
    """
    check_hnsw_limit(model_id=model_id, dim=dim)
    raw: Any = session.connection().connection.driver_connection  # composed by psycopg: identifiers from the catalog
    with raw.cursor() as cursor:
        cursor.execute(_LOCK)
        if schema_embedding_dim(session) is None:
            return
        indexes = session.execute(_VECTOR_INDEXES, {"tables": list(VECTOR_TABLES)}).all()
        session.execute(_KEEP_INDEXES, {"definitions": [definition for _, definition in indexes]})
        for name, _ in indexes:
            cursor.execute(SQL("DROP INDEX {}").format(SQL(name)))  # regclass text: already quoted as needed
        for table in VECTOR_TABLES:
            cursor.execute(_OPEN.format(Identifier(table)))


def close_vector_columns(session: Session, *, dim: int, phase: Callable[[str], None] = lambda _: None) -> None:
    """Give open vector columns ``dim`` dimensions and rebuild the indexes ``open_vector_columns`` dropped.

    Call in the transaction that ends the switch, once every stored vector is the new model's: the ALTER checks
    each one's dimension (a rewrite of both tables), and the indexes are built with ``index_memory``. A no-op when
    the columns have a dimension (a switch between models of one size). ``phase`` hears each step.
    """
    if schema_embedding_dim(session) is not None:
        return
    raw: Any = session.connection().connection.driver_connection
    with raw.cursor() as cursor:
        for table in VECTOR_TABLES:
            phase(f"{table}: {dim}-d vectors")
            cursor.execute(_RESIZE.format(Identifier(table), Literal(int(dim))))
        memory = index_memory(int(session.execute(_CHUNKS).scalar_one()))
        session.execute(text("SELECT set_config('maintenance_work_mem', :memory, true)"), {"memory": memory})
        for definition in session.execute(_KEPT_INDEXES).scalar() or []:
            phase(f"build index {definition.split(' ON ', 1)[0].split()[-1]}")
            # pg_get_indexdef names a partitioned table ``ON ONLY``, which would build no partition's index
            cursor.execute(SQL(definition.replace(" ON ONLY ", " ON ", 1)))
    session.execute(_CLOSED, {"dim": dim})


def check_hnsw_limit(*, model_id: str, dim: int) -> None:
    """Raise EmbeddingMismatchError for a model whose vectors no HNSW index takes."""
    if dim > HNSW_MAX_DIMENSIONS:
        raise EmbeddingMismatchError(
            f"embedding model {model_id!r} makes {dim}-d vectors; pgvector's HNSW index takes at most "
            f"{HNSW_MAX_DIMENSIONS:,}; choose a model of at most {HNSW_MAX_DIMENSIONS:,} dimensions"
        )
