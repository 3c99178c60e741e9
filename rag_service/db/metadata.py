"""SQL for a document's generated metadata (the backfill's and ingestion's summaries): documents to visit, their
texts and chunks, and writing the generated keys."""

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


@dataclass(frozen=True, slots=True)
class DocumentText:
    """A stored document's text as the backfill reads it (``content_hash``: the version it summarises)."""

    id: int
    text: str
    content_hash: str
    metadata: dict[str, Any]


def document_text(session: Session, collection: str, document_id: int) -> DocumentText | None:
    """A document's stored text, hash and metadata; None when it is gone."""
    columns = select(Document.id, Document.content, Document.content_hash, Document.meta)
    row = session.execute(columns.where(Document.collection == collection, Document.id == document_id)).first()
    return DocumentText(row[0], str(row[1]), row[2], dict(row[3] or {})) if row else None


def stored_metadata(session: Session, collection: str, document_id: int) -> dict[str, Any]:
    """A document's stored metadata (``{}`` when it is gone)."""
    query = select(Document.meta).where(Document.collection == collection, Document.id == document_id)
    found = session.execute(query).scalar_one_or_none()
    return dict(found or {})


def holding_key(session: Session, collection: str, document_ids: Sequence[int], key: str) -> set[int]:
    """Those of ``document_ids`` whose metadata has ``key``, in one query per 5,000 ids."""
    found: set[int] = set()
    for start in range(0, len(document_ids), 5000):
        ids = list(document_ids[start : start + 5000])
        held = Document.meta.has_key(key)
        found.update(
            session.scalars(select(Document.id).where(Document.collection == collection, Document.id.in_(ids), held))
        )
    return found


def chunk_ids(session: Session, document_ids: Sequence[int]) -> list[int]:
    """The chunks of these documents, by id."""
    if not document_ids:
        return []
    query = select(DocumentChunk.id).where(DocumentChunk.document_id.in_(list(document_ids))).order_by(DocumentChunk.id)
    return list(session.execute(query).scalars())


_SET_GENERATED = text(
    "UPDATE documents SET metadata = (metadata - CAST(:keys AS text[])) || :generated "
    "WHERE collection = :collection AND id = :id AND content_hash = :content_hash"
).bindparams(bindparam("generated", type_=JSONB))


def set_generated_metadata(
    session: Session,
    collection: str,
    document_id: int,
    generated: dict[str, Any],
    *,
    keys: Sequence[str],
    content_hash: str,
) -> bool:
    """Replace a document's ``keys`` of its metadata by ``generated`` (the rest, its text and chunks stay), unless its
    text is no longer the version of ``content_hash`` (then False: it changed since it was read)."""
    params = {"collection": collection, "id": document_id, "keys": list(keys), "generated": generated}
    params["content_hash"] = content_hash
    return bool(session.execute(_SET_GENERATED, params).rowcount)  # type: ignore[attr-defined]
