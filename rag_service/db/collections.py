"""What collections hold: document and chunk counts per collection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rag_service.db.models import Document


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """One collection: its name and how many documents and chunks it holds."""

    name: str
    documents: int
    chunks: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in a fixed key order."""
        return {"name": self.name, "documents": self.documents, "chunks": self.chunks}


def list_collections(session: Session) -> list[CollectionInfo]:
    """Every collection with at least one document, ordered by name."""
    rows = session.execute(
        select(Document.collection, func.count(Document.id), func.coalesce(func.sum(Document.chunk_count), 0))
        .group_by(Document.collection)
        .order_by(Document.collection)
    )
    return [CollectionInfo(name, int(documents), int(chunks)) for name, documents, chunks in rows]
