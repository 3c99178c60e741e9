"""What the HTTP API lists and edits: collections, one document by source, preset rows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from rag_service.config import Preset
from rag_service.db.models import Document, RagConfiguration
from rag_service.db.presets import load_preset


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """One collection with its document and chunk counts."""

    name: str
    documents: int
    chunks: int


def list_collections(session: Session) -> list[CollectionInfo]:
    """Every collection that holds documents, by name."""
    rows = session.execute(
        select(Document.collection, func.count(Document.id), func.coalesce(func.sum(Document.chunk_count), 0))
        .group_by(Document.collection)
        .order_by(Document.collection)
    )
    return [CollectionInfo(name, int(docs), int(chunks)) for name, docs, chunks in rows]


def delete_by_source(session: Session, *, collection: str, source: str) -> int:
    """Delete the document ``source`` of ``collection`` (its chunks cascade); returns 0 or 1."""
    result = session.execute(delete(Document).where(Document.collection == collection, Document.source == source))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def update_preset(session: Session, context_type: str, values: dict[str, Any]) -> Preset:
    """Change some columns of a preset row, validated like a per-call override; returns the new preset.

    UnknownContextError for a missing row, ConfigurationError for an unknown column or a bad value.
    """
    updated = load_preset(session, context_type).with_overrides(values)
    row = {k: v for k, v in asdict(updated).items() if k != "context_type"}
    session.execute(
        update(RagConfiguration)
        .where(RagConfiguration.context_type == context_type)
        .values(**row, updated_at=func.now())
    )
    return updated
