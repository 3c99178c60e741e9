"""Where documents' relative source keys came from: ``documents.origin`` (migration 0019).

The folder a file's key is relative to (its checkout's root, or ``--root``); '' for a document given as text;
NULL where it is not known (written before 0019, or keyed by an absolute path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import bindparam, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import Text

from rag_service.db.documents import commit_synchronously
from rag_service.db.models import Document

#: the origin of a document given as text (``index_texts``, the HTTP API), not read from a file
TEXT_ORIGIN = ""

_RECORD = text(
    "UPDATE documents SET origin = CAST(:origin AS text) WHERE collection = :collection AND source = ANY(:sources) "
    "AND origin IS DISTINCT FROM CAST(:origin AS text)"
).bindparams(bindparam("sources", type_=ARRAY(Text())))
_RECORD_UNKNOWN = text(
    "UPDATE documents SET origin = CAST(:origin AS text) WHERE collection = :collection AND source = ANY(:sources) "
    "AND origin IS NULL"
).bindparams(bindparam("sources", type_=ARRAY(Text())))


def stored_origins(session: Session, *, collection: str, sources: Sequence[str]) -> dict[str, str | None]:
    """The origins of the stored documents with these keys, by source; a key not stored is absent."""
    found: dict[str, str | None] = {}
    for start in range(0, len(sources), 5000):
        rows = session.execute(
            select(Document.source, Document.origin).where(
                Document.collection == collection, Document.source.in_(sources[start : start + 5000])
            )
        )
        found.update((row.source, row.origin) for row in rows)
    return found


def record_origins(session: Session, *, collection: str, origins: Mapping[str, str], only_unknown: bool) -> None:
    """Set the stored documents' origins (by source); ``only_unknown``: only where none is stored yet. The
    commit is synchronous, as the documents' own."""
    commit_synchronously(session)
    by_origin: dict[str, list[str]] = {}
    for source, origin in origins.items():
        by_origin.setdefault(origin, []).append(source)
    statement = _RECORD_UNKNOWN if only_unknown else _RECORD
    for origin, sources in by_origin.items():
        session.execute(statement, {"collection": collection, "origin": origin, "sources": sources})


def rename_document(session: Session, *, collection: str, document_id: int, source: str, origin: str | None) -> None:
    """Give a stored document a new source key and origin (its chunks follow through the document id)."""
    session.execute(
        update(Document)
        .where(Document.collection == collection, Document.id == document_id)
        .values(source=source, origin=origin)
    )
