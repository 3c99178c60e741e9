"""An empty database's vector columns sized to the model of its first write.

The migrations create the vector columns with ``SCHEMA_EMBEDDING_DIM`` (384: the bundled MiniLM's) dimensions, so a
model of another size (``RAG_EMBEDDING_MODEL``: bge-base and mpnet make 768) was refused by every database, a new one
included. A database that holds no vector yet takes the dimension of the model that writes first; one that holds
vectors keeps its own (``index_settings.check_dimension`` says what to do).
"""

from __future__ import annotations

from typing import Any

from psycopg.sql import SQL, Identifier, Literal
from sqlalchemy import text
from sqlalchemy.orm import Session

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


def schema_embedding_dim(session: Session) -> int:
    """The dimension of the ``document_chunks.embedding`` column (the migrations', or the first write's)."""
    dim = session.execute(_COLUMN_DIMENSION).scalar()
    if dim is None:
        raise SchemaError("the database has no document_chunks table; run `rag db upgrade` first")
    return int(dim)


def fit_vector_columns(session: Session, *, model_id: str, dim: int) -> None:
    """Give the vector columns ``dim`` dimensions when no table holds a vector yet (the first write's transaction).

    The tables are locked first, so two first writes with different models cannot both pass: the second sees the
    first one's rows (or its dimension) and is refused by the dimension check after this. Their HNSW indexes are
    rebuilt by the ALTER, at no cost on empty tables.
    """
    if schema_embedding_dim(session) == dim:
        return
    if dim > HNSW_MAX_DIMENSIONS:
        raise EmbeddingMismatchError(
            f"embedding model {model_id!r} makes {dim}-d vectors; pgvector's HNSW index takes at most "
            f"{HNSW_MAX_DIMENSIONS:,}; choose a model of at most {HNSW_MAX_DIMENSIONS:,} dimensions"
        )
    raw: Any = session.connection().connection.driver_connection  # composed by psycopg: a typmod takes no parameter
    with raw.cursor() as cursor:
        cursor.execute(_LOCK)
        if schema_embedding_dim(session) == dim or cursor.execute(_HOLDS_VECTORS).fetchone()[0]:
            return
        for table in VECTOR_TABLES:
            cursor.execute(_RESIZE.format(Identifier(table), Literal(int(dim))))
