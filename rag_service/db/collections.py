"""What collections hold: document and chunk counts per collection."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from rag_service.db.documents import collection_names
from rag_service.db.models import Document
from rag_service.db.source_match import key_spellings
from rag_service.errors import ConfigurationError, UnknownCollectionError, closest_name, shown_name
from rag_service.knobs import MAX_COLLECTION_CHARS


def validate_collection(collection: str) -> str:
    """Collections are non-empty names of at most ``MAX_COLLECTION_CHARS`` characters, without NUL (PostgreSQL's
    text cannot hold it; other control characters are stored as they are)."""
    if not isinstance(collection, str):
        raise ConfigurationError(f"collection must be a name (text), not {type(collection).__name__}")
    if "\x00" in collection:
        raise ConfigurationError(
            f"collection name {shown_name(collection)} contains a NUL character (\\x00), which PostgreSQL "
            "cannot store; remove it"
        )
    if len(collection) > MAX_COLLECTION_CHARS:
        raise ConfigurationError(
            f"collection name {shown_name(collection)} has {len(collection)} characters; "
            f"it must be 1-{MAX_COLLECTION_CHARS} characters"
        )
    if not collection.strip():
        raise ConfigurationError(
            f"collection name {collection[:50]!r} must be 1-{MAX_COLLECTION_CHARS} characters, not blank"
        )
    return collection


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


def collection_exists(session: Session, name: str) -> bool:
    """Whether ``name`` holds a document: one probe of the primary key's leading column (one shard on Citus)."""
    probe = select(Document.id).where(Document.collection == name).limit(1)
    return session.execute(probe).first() is not None


def has_other_spellings(name: str) -> bool:
    """Whether ``name`` reads differently in NFC or NFD (an accent composed or not): only then can a stored
    collection that looks the same be another string."""
    return len(key_spellings(name)) > 1


def stored_spelling(session: Session, name: str) -> str:
    """The stored collection ``name`` means: itself when it exists (or has one spelling only), else its other
    Unicode form (NFC or NFD) when that one holds documents. A name typed composed (NFC, as a keyboard or a web
    form sends it) finds the collection a macOS folder name created decomposed (NFD), and the other way round,
    as a ``source`` filter finds its key: the two looked the same in every listing, and an ingest under the other
    form made a second collection beside the first."""
    spellings = key_spellings(name)
    if len(spellings) == 1 or collection_exists(session, name):
        return name
    return next((other for other in spellings[1:] if collection_exists(session, other)), name)


#: how many existing collections an UnknownCollectionError names (closest spellings first)
NAMED_COLLECTIONS = 10


def require_collection(session: Session, name: str) -> None:
    """Raise ``UnknownCollectionError`` naming the existing collections when ``name`` holds no document."""
    if collection_exists(session, name):
        return
    existing = collection_names(session)
    raise UnknownCollectionError(unknown_collection_message(name, existing), collection=name, existing=existing)


def unknown_collection_message(name: str, existing: list[str]) -> str:
    """One line: the unknown name, the closest existing ones (at most ``NAMED_COLLECTIONS``, each cut to
    ``errors.SHOWN_NAME_CHARS``) and the fix."""
    if not existing:
        return (
            f"collection {shown_name(name)} does not exist: the database holds no documents yet; "
            "index documents into it first"
        )
    near = closest_name(name, existing)  # first among the names shown, then difflib's others
    close = list(dict.fromkeys(c for c in (near, *difflib.get_close_matches(name, existing, n=3)) if c))[:3]
    shown = close + [c for c in existing if c not in close][: max(NAMED_COLLECTIONS - len(close), 0)]
    more = f" and {len(existing) - len(shown)} more" if len(existing) > len(shown) else ""
    hint = f"did you mean {shown_name(near)}? " if near else ""
    listed = ", ".join(shown_name(c) for c in shown)
    return f"collection {shown_name(name)} does not exist; {hint}the collections are {listed}{more}"
