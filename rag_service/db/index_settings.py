"""The guard that keeps vectors of different embedding models (or text-search configs) apart."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from rag_service.db.locks import running_runs
from rag_service.db.models import IndexSettings
from rag_service.db.vector_columns import fit_vector_columns, schema_embedding_dim
from rag_service.errors import ConfigurationError, EmbeddingMismatchError

_NEW_DATABASE_HINT = "point RAG_DATABASE_URL (or RAG_DATA_DIR) at a new database for it"


class StoredModel(NamedTuple):
    """What every query checks of the settings row (read without the ORM: it is on every query's path)."""

    embedding_model: str
    switching_to: str | None
    fts_config: str


_STORED_MODEL = text("SELECT embedding_model, switching_to, fts_config FROM index_settings WHERE id = 1")
#: the name as ``regconfig`` reads it (unquoted: folded to lowercase); RAG_FTS_CONFIG is one identifier
_CONFIG_EXISTS = text("SELECT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = lower(:cfg))")
_CONFIG_NAMES = text("SELECT cfgname FROM pg_ts_config ORDER BY cfgname")
#: a recorded config that does not exist made no tsvector: the one that exists replaces it (see below)
_REPLACE_FTS_CONFIG = text("UPDATE index_settings SET fts_config = :cfg WHERE id = 1 AND fts_config = :recorded")
#: whether any row was written with the recorded settings (every table of ``VECTOR_TABLES``; tsvectors are the chunks')
_HOLDS_ANY = text("SELECT EXISTS (SELECT 1 FROM document_chunks) OR EXISTS (SELECT 1 FROM document_contexts)")
_FORGET = text("DELETE FROM index_settings WHERE id = 1 AND switching_to IS NULL")


def read_stored_model(session: Session) -> StoredModel | None:
    """The stored model, any switch under way and the text-search config; None before the first write."""
    row = session.execute(_STORED_MODEL).first()
    return StoredModel(*row) if row is not None else None


def check_index_settings(
    session: Session, *, model_id: str, dim: int, fts_config: str, record: bool = False, switching: bool = False
) -> None:
    """Raise EmbeddingMismatchError if stored vectors or tsvectors were made differently.

    With ``record`` the settings are stored when the database has none yet (first write). With
    ``switching`` (the ``rag reindex --all`` re-embedding every collection) an unfinished switch to
    ``model_id`` passes. A first write into a database without vectors sizes its vector columns to ``dim``
    (``fit_vector_columns``).
    """
    stored = read_index_settings(session)
    if (
        record
        and stored is not None
        and stored.fts_config != fts_config
        and not fts_config_exists(session, stored.fts_config)
    ):
        # a typo recorded by an earlier version (its first write failed, the record stayed): no tsvector was made
        # with a config the server lacks, so the database is not locked to it
        check_fts_config(session, fts_config)
        session.execute(_REPLACE_FTS_CONFIG, {"cfg": fts_config, "recorded": stored.fts_config})
        session.expire(stored)
    if record and stored is not None and _differs(stored, model_id, fts_config) and _abandoned(session):
        # recorded by a first write that stored nothing (it failed, or was stopped): nothing to mix with
        session.execute(_FORGET)
        session.expire(stored)
        stored = read_index_settings(session)
    if stored is None:  # nothing written yet: the first write sizes the vector columns and records its model
        if record:
            check_fts_config(session, fts_config)  # recorded, a typo would lock the database to it for good
            fit_vector_columns(session, model_id=model_id, dim=dim)
            session.execute(
                text(
                    "INSERT INTO index_settings (id, embedding_model, embedding_dim, fts_config) "
                    "VALUES (1, :model, :dim, :cfg) ON CONFLICT (id) DO NOTHING"
                ),
                {"model": model_id, "dim": dim, "cfg": fts_config},
            )
            check_index_settings(session, model_id=model_id, dim=dim, fts_config=fts_config)
        return
    if not record and _differs(stored, model_id, fts_config) and not holds_any(session):
        return  # a read of a database that holds nothing mixes nothing (the record may be a failed first write's)
    check_dimension(session, model_id=model_id, dim=dim)
    if not (switching and stored.switching_to == model_id):
        check_stored_model(stored, model_id=model_id, fts_config=fts_config)
    elif stored.fts_config != fts_config:
        raise EmbeddingMismatchError(fts_mismatch_message(stored.fts_config, fts_config))


def _differs(stored: IndexSettings, model_id: str, fts_config: str) -> bool:
    return stored.switching_to is None and (stored.embedding_model, stored.fts_config) != (model_id, fts_config)


def _abandoned(session: Session) -> bool:
    """Whether the recorded settings are a first write's that stored nothing and runs no more: no row holds them,
    and no run but the caller's holds a lock (one may be about to write its first rows with them)."""
    return not holds_any(session) and running_runs(session) <= 1


def holds_any(session: Session) -> bool:
    """Whether the database holds a vector (or a chunk's tsvector) made with the recorded settings."""
    return bool(session.execute(_HOLDS_ANY).scalar_one())


def check_stored_model_read(
    session: Session, stored: IndexSettings | StoredModel | None, *, model_id: str, fts_config: str
) -> None:
    """``check_stored_model`` for a read: a database holding nothing yet refuses no model (its recorded settings
    are a first write's that stored nothing; the next write records its own)."""
    try:
        check_stored_model(stored, model_id=model_id, fts_config=fts_config)
    except EmbeddingMismatchError:
        if holds_any(session):
            raise


def fts_config_exists(session: Session, fts_config: str) -> bool:
    """Whether the server has the text-search configuration ``fts_config``."""
    return bool(session.execute(_CONFIG_EXISTS, {"cfg": fts_config}).scalar_one())


def check_fts_config(session: Session, fts_config: str) -> None:
    """Raise ConfigurationError (one line, naming the configurations the server has) unless it has ``fts_config``."""
    if fts_config_exists(session, fts_config):
        return
    names = list(session.scalars(_CONFIG_NAMES))  # no closest-name hint: 'deutsch' is nearest 'dutch'
    raise ConfigurationError(
        f"RAG_FTS_CONFIG ({fts_config!r}) is no text-search configuration of this PostgreSQL server; "
        f"set it to one of: {', '.join(names)}"
    )


def check_dimension(session: Session, *, model_id: str, dim: int) -> None:
    """Raise EmbeddingMismatchError unless the schema's vector column has ``dim`` dimensions (any while a switch
    of dimension has the columns open: the switch's marker then refuses every model but the switching run's)."""
    column_dim = schema_embedding_dim(session)
    if column_dim is not None and dim != column_dim:
        raise EmbeddingMismatchError(
            f"embedding model {model_id!r} makes {dim}-d vectors but this database stores {column_dim}-d "
            f"vectors; run `rag reindex --all` to re-embed every collection with it, or use a {column_dim}-d model"
        )


def check_stored_model(stored: IndexSettings | StoredModel | None, *, model_id: str, fts_config: str) -> None:
    """Raise EmbeddingMismatchError unless the stored vectors are all of ``model_id`` with ``fts_config``
    (no settings stored yet: nothing to mix with). The dimension is the schema's, checked once."""
    if stored is None:
        return
    if stored.switching_to is not None:
        raise EmbeddingMismatchError(unfinished_switch_message(stored.embedding_model, stored.switching_to))
    if stored.embedding_model != model_id:
        raise EmbeddingMismatchError(
            f"this database holds vectors of {stored.embedding_model!r} but RAG_EMBEDDING_MODEL and "
            f"RAG_EMBEDDING_BACKEND give {model_id!r}; run `rag reindex --all` to re-embed every collection "
            "with it, or set them back"
        )
    if stored.fts_config != fts_config:
        raise EmbeddingMismatchError(fts_mismatch_message(stored.fts_config, fts_config))


def unfinished_switch_message(from_model: str, to_model: str) -> str:
    """The one line every read and ordinary write answers while a switch of the model is unfinished."""
    return (
        f"a switch of the embedding model from {from_model!r} to {to_model!r} is unfinished, so this database "
        f"holds vectors of both; run `rag reindex --all` with RAG_EMBEDDING_MODEL and RAG_EMBEDDING_BACKEND "
        f"giving {to_model!r} to finish it (or {from_model!r} to switch back)"
    )


def fts_mismatch_message(stored: str, configured: str) -> str:
    """The line refusing another text-search config than the stored tsvectors'."""
    return (
        f"this database's tsvectors use text-search config {stored!r} but RAG_FTS_CONFIG is "
        f"{configured!r}; set it back or {_NEW_DATABASE_HINT}"
    )


def read_index_settings(session: Session) -> IndexSettings | None:
    """The stored settings row, if vectors were ever written."""
    return session.execute(select(IndexSettings).where(IndexSettings.id == 1)).scalar_one_or_none()
