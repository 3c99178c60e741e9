"""SQL for the metadata backfill: documents to visit, their chunks, and writing a document's metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from rag_service.db.models import Document, DocumentChunk


@dataclass(frozen=True, slots=True)
class DocumentRef:
    """A stored document as the backfill needs it."""

    id: int
    collection: str
    source: str
    title: str


def collections_with_documents(session: Session, collection: str | None = None) -> list[str]:
    """``[collection]`` if it holds documents, or every collection that does (``None``), by name."""
    query = select(Document.collection).distinct().order_by(Document.collection)
    if collection is not None:
        query = query.where(Document.collection == collection)
    return list(session.execute(query).scalars())


def document_refs(session: Session, collection: str) -> list[DocumentRef]:
    """The documents of ``collection``, ordered by source."""
    rows = session.execute(
        select(Document.id, Document.collection, Document.source, Document.title)
        .where(Document.collection == collection)
        .order_by(Document.source)
    )
    return [DocumentRef(*row) for row in rows]


def document_text(session: Session, document_id: int) -> tuple[str, dict[str, Any]]:
    """A document's stored text and metadata."""
    row = session.execute(select(Document.content, Document.meta).where(Document.id == document_id)).one()
    return str(row[0]), dict(row[1] or {})


def chunk_ids(session: Session, document_ids: Sequence[int]) -> list[int]:
    """The chunks of these documents, by id."""
    if not document_ids:
        return []
    query = select(DocumentChunk.id).where(DocumentChunk.document_id.in_(list(document_ids))).order_by(DocumentChunk.id)
    return list(session.execute(query).scalars())


_SET_METADATA = text("UPDATE documents SET metadata = :metadata WHERE id = :id").bindparams(
    bindparam("metadata", type_=JSONB)
)


def set_document_metadata(session: Session, document_id: int, metadata: dict[str, Any]) -> None:
    """Replace a document's metadata (its text, hash and chunks stay as they are)."""
    session.execute(_SET_METADATA, {"id": document_id, "metadata": metadata})
