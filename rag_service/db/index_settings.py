"""The guard that keeps vectors of different embedding models (or text-search configs) apart."""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from rag_service.db.models import IndexSettings
from rag_service.errors import EmbeddingMismatchError, SchemaError

_NEW_DATABASE_HINT = "point RAG_DATABASE_URL (or RAG_DATA_DIR) at a new database for it"


def schema_embedding_dim(session: Session) -> int:
    """The dimension of the ``document_chunks.embedding`` column as created by the migrations."""
    row = session.execute(
        text(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = to_regclass('document_chunks') AND attname = 'embedding'"
        )
    ).first()
    if row is None:
        raise SchemaError("the database has no document_chunks table; run `rag db upgrade` first")
    return int(row[0])


def check_index_settings(session: Session, *, model_id: str, dim: int, fts_config: str, record: bool = False) -> None:
    """Raise EmbeddingMismatchError if stored vectors or tsvectors were made differently.

    With ``record`` the settings are stored when the database has none yet (first write).
    """
    column_dim = schema_embedding_dim(session)
    if dim != column_dim:
        raise EmbeddingMismatchError(
            f"embedding model {model_id!r} makes {dim}-d vectors but this database stores {column_dim}-d "
            f"vectors; use a {column_dim}-d model or {_NEW_DATABASE_HINT}"
        )
    stored = session.execute(select(IndexSettings).where(IndexSettings.id == 1)).scalar_one_or_none()
    if stored is None:
        if record:
            session.execute(
                text(
                    "INSERT INTO index_settings (id, embedding_model, embedding_dim, fts_config) "
                    "VALUES (1, :model, :dim, :cfg) ON CONFLICT (id) DO NOTHING"
                ),
                {"model": model_id, "dim": dim, "cfg": fts_config},
            )
            check_index_settings(session, model_id=model_id, dim=dim, fts_config=fts_config)
        return
    if stored.embedding_model != model_id or stored.embedding_dim != dim:
        raise EmbeddingMismatchError(
            f"this database holds vectors of {stored.embedding_model!r} ({stored.embedding_dim}-d) but "
            f"RAG_EMBEDDING_MODEL and RAG_EMBEDDING_BACKEND give {model_id!r} ({dim}-d); set them back or "
            f"{_NEW_DATABASE_HINT}"
        )
    if stored.fts_config != fts_config:
        raise EmbeddingMismatchError(
            f"this database's tsvectors use text-search config {stored.fts_config!r} but RAG_FTS_CONFIG is "
            f"{fts_config!r}; set it back or {_NEW_DATABASE_HINT}"
        )


def read_index_settings(session: Session) -> IndexSettings | None:
    """The stored settings row, if vectors were ever written."""
    return session.execute(select(IndexSettings).where(IndexSettings.id == 1)).scalar_one_or_none()
