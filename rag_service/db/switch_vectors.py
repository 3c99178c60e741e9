"""The vectors a switch of the embedding model has embedded so far (``model_switch_vectors``, migration 0020).

A switch writes each collection's new vectors in one transaction (``ingest.bulkwrite``), so a run stopped midway
would lose all it embedded. Each vector is also kept here as it is made, in a short transaction of its own, by
model and content hash; the next run of the switch to that model takes them instead of embedding again. The
switch's start drops what other models left, its end drops everything (``db.model_switch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from rag_service.db.models import SwitchVector

if TYPE_CHECKING:
    import numpy as np


def switch_vectors(session: Session, *, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
    """The kept vectors of ``model_id`` for these content hashes."""
    if not hashes:
        return {}
    v = SwitchVector
    query = select(v.content_hash, v.embedding).where(v.model == model_id, v.content_hash.in_(sorted(set(hashes))))
    return {content_hash: vector for content_hash, vector in session.execute(query)}


def keep_switch_vectors(session: Session, *, model_id: str, vectors: dict[str, np.ndarray[Any, Any]]) -> None:
    """Keep ``vectors`` (content hash -> vector) of ``model_id``; a hash kept already keeps its vector."""
    if vectors:
        rows = [{"model": model_id, "content_hash": h, "embedding": vector} for h, vector in vectors.items()]
        session.execute(insert(SwitchVector).on_conflict_do_nothing(), rows)


def drop_switch_vectors(session: Session, *, except_model: str | None = None) -> None:
    """Drop the kept vectors (of every model but ``except_model``)."""
    statement = delete(SwitchVector)
    if except_model is not None:
        statement = statement.where(SwitchVector.model != except_model)
    session.execute(statement)
