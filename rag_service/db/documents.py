"""SQL for documents and their chunks: look-ups, atomic replacement, deletion, embedding reuse."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, TextClause, bindparam, delete, func, select, text, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from rag_service.config import DEFAULT_BM25_B, DEFAULT_BM25_K1, SCHEMA_EMBEDDING_DIM
from rag_service.db import contexts, graph
from rag_service.db.chunk_text import keyword_prefix
from rag_service.db.citus import has_citus
from rag_service.db.keywords import DEFAULT_KEYWORD_COUNT, KEYWORDS_SQL
from rag_service.db.models import CollectionStats, Document, DocumentChunk
from rag_service.db.vector_type import BinaryVector
from rag_service.errors import first_line

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What ingestion needs to know about a document already in the database."""

    id: int
    source: str
    content_hash: str
    chunker: str
    #: the folder its key is relative to (``db.origins``)
    origin: str | None = None


@dataclass(slots=True)
class ChunkRow:
    """One chunk ready to be written."""

    chunk_index: int
    chunk_type: str
    content: str
    start_char: int
    end_char: int
    token_count: int
    content_hash: str
    embedding: np.ndarray[Any, np.dtype[np.float32]]
    headers: dict[str, str] = field(default_factory=dict)
    header_path: str = ""
    parent_content: str | None = None
    parent_start: int | None = None
    parent_end: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    lead: str = ""  # matched after the header path (a table row's header row)


_CHUNK_COLUMNS = (
    "document_id, collection, chunk_index, chunk_type, content, parent_content, parent_start, parent_end, headers, "
    "header_path, start_char, end_char, token_count, content_hash, embedding, content_tsv, metadata"
)
_CHUNK_TSV = "to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text(:search_prefix || E'\\n' || :content))"
_CHUNK_VALUES = (
    "CAST(:document_id AS bigint), CAST(:collection AS varchar), CAST(:chunk_index AS integer), "
    "CAST(:chunk_type AS varchar), CAST(:content AS text), CAST(:parent_content AS text), "
    "CAST(:parent_start AS integer), CAST(:parent_end AS integer), :headers, CAST(:header_path AS text), "
    "CAST(:start_char AS integer), CAST(:end_char AS integer), CAST(:token_count AS integer), "
    "CAST(:content_hash AS varchar), CAST(:embedding AS vector)"
)


@cache
def _insert_chunk(*, keywords: bool, keywords_in_bm25: bool) -> TextClause:
    """The chunk INSERT; with ``keywords``, ``metadata.keywords`` is computed in the same statement
    (``db.keywords``), and with ``keywords_in_bm25`` the keywords are added to the stored tsvector."""
    # every piece is a constant of this module or of db.keywords; values are bound parameters
    if not keywords:
        sql = f"INSERT INTO document_chunks ({_CHUNK_COLUMNS}) VALUES ({_CHUNK_VALUES}, {_CHUNK_TSV}, :metadata)"  # noqa: S608
    else:
        tsv = _CHUNK_TSV
        if keywords_in_bm25:
            words = "(SELECT coalesce(string_agg(value, ' '), '') FROM jsonb_array_elements_text(kw.keywords))"
            tsv = f"{_CHUNK_TSV} || to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text({words}))"
        sql = (
            f"INSERT INTO document_chunks ({_CHUNK_COLUMNS}) "  # noqa: S608
            f"SELECT {_CHUNK_VALUES}, {tsv}, :metadata || jsonb_build_object('keywords', kw.keywords) "
            f"FROM (SELECT {KEYWORDS_SQL} AS keywords) kw"
        )
    return text(sql).bindparams(
        bindparam("headers", type_=JSONB),
        bindparam("metadata", type_=JSONB),
        bindparam("embedding", type_=BinaryVector(SCHEMA_EMBEDDING_DIM)),
    )


@dataclass(frozen=True, slots=True)
class ChunkKeywords:
    """How chunks get ``metadata.keywords`` when written (``db.keywords``); ``count`` 0: none."""

    count: int = DEFAULT_KEYWORD_COUNT
    in_bm25: bool = False
    bm25_k1: float = DEFAULT_BM25_K1
    bm25_b: float = DEFAULT_BM25_B


# updated_at comes through EXCLUDED: Citus allows no STABLE function (now()) in DO UPDATE SET.
_UPSERT_DOCUMENT = text(
    "INSERT INTO documents (collection, source, title, content, content_hash, chunker, chunk_count, metadata, "
    "updated_at) "
    "VALUES (:collection, :source, :title, :content, :content_hash, :chunker, :chunk_count, :metadata, now()) "
    "ON CONFLICT (collection, source) DO UPDATE SET title = EXCLUDED.title, content = EXCLUDED.content, "
    "content_hash = EXCLUDED.content_hash, chunker = EXCLUDED.chunker, chunk_count = EXCLUDED.chunk_count, "
    "metadata = EXCLUDED.metadata, updated_at = EXCLUDED.updated_at "
    "RETURNING id"
).bindparams(bindparam("metadata", type_=JSONB))


#: stored with each document's chunker fingerprint; bump it when what is indexed per chunk changes,
#: so the next run rewrites documents (unchanged chunk texts keep their vectors). tsv3: tsvectors read
#: ``rag_keyword_text`` (migration 0021: CJK in pairs, NFKC), so documents of other scripts are found; tsv4: a
#: bare ``<name>``'s name read too (``db.chunk_text.keyword_prefix``); tsv5: a chunk's lines in its metadata
#: (``rag_service.lines``), so chunks stored before them get them at the next run
INDEX_FORMAT = "tsv5"


#: raises the transaction's commit to a synchronous one when the role or database turned it off;
#: stronger settings (``remote_apply``, ``remote_write``) and ``local`` are already durable here
_SYNCHRONOUS_COMMIT = text(
    "SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') = 'off'"
)


def commit_synchronously(session: Session) -> None:
    """Make the session's transaction commit synchronously (``SET LOCAL``), whatever the server sets.

    ``ALTER ROLE/DATABASE ... SET synchronous_commit = off`` (a common speed setting) lets a commit
    return before its WAL is on disk; ingestion promises that what its report counts as written
    survives a crash. Call it inside the write transaction, before its commit.
    """
    session.execute(_SYNCHRONOUS_COMMIT)


def find_document(session: Session, *, collection: str, source: str) -> StoredDocument | None:
    """The stored document with this key, if any."""
    row = session.execute(
        select(Document.id, Document.source, Document.content_hash, Document.chunker).where(
            Document.collection == collection, Document.source == source
        )
    ).first()
    return StoredDocument(*row) if row else None


def find_documents(session: Session, *, collection: str, sources: Sequence[str]) -> dict[str, StoredDocument]:
    """The stored documents with these keys, by source, in one query per 5,000 sources."""
    found: dict[str, StoredDocument] = {}
    for start in range(0, len(sources), 5000):
        rows = session.execute(
            select(Document.id, Document.source, Document.content_hash, Document.chunker, Document.origin).where(
                Document.collection == collection, Document.source.in_(sources[start : start + 5000])
            )
        )
        found.update((row.source, StoredDocument(*row)) for row in rows)
    return found


def stored_embeddings(session: Session, *, collection: str, hashes: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
    """Vectors already stored for chunk texts with these content hashes (the hash of the embedded text; one
    model for every vector of a database): ``collection``'s own, then another collection's for the rest, so the
    same documents indexed into a second collection are not embedded again.

    The collection's own look-up stays on one shard (Citus) or partition; the rest is asked of each other
    collection in turn, by the ``(collection, content_hash)`` index, only for hashes the collection lacks. That
    part reaches every shard, so a Citus worker that is down fails it: the texts are embedded instead. On Citus it
    has a transaction of its own: a worker failing in the caller's failed its COMMIT after the savepoint's rollback.
    """
    if not hashes:
        return {}
    c = DocumentChunk
    wanted = sorted(set(hashes))
    own = select(c.content_hash, c.embedding).where(c.collection == collection, c.content_hash.in_(wanted))
    found = _first_vectors(session, own)
    rest = [h for h in wanted if h not in found]
    if rest:
        # OFFSET 0 keeps the LATERAL a probe per collection: pulled up into a join, the planner may scan instead
        held = (
            select(c.content_hash, c.embedding)
            .where(c.collection == CollectionStats.collection, c.content_hash.in_(rest))
            .offset(0)
            .lateral("held")
        )
        elsewhere = (
            select(held.c.content_hash, held.c.embedding)
            .select_from(CollectionStats)
            .join(held, true())
            .where(CollectionStats.collection != collection)
        )
        try:
            if has_citus(session.connection()):
                with Session(session.connection().engine) as apart:
                    found.update(_first_vectors(apart, elsewhere))
            else:
                with session.begin_nested():  # a savepoint: a failure here leaves the caller's transaction usable
                    found.update(_first_vectors(session, elsewhere))
        except DBAPIError as exc:  # another collection's Citus worker is down: embed instead of failing the ingest
            log.warning("vectors of other collections not reused (%s); embedding them", first_line(exc))
    return found


def _first_vectors(session: Session, statement: Select[Any]) -> dict[str, np.ndarray[Any, Any]]:
    """The first vector of each content hash among the ``(content_hash, embedding)`` rows of ``statement``
    (float32 arrays, as ``BinaryVector`` reads them)."""
    found: dict[str, np.ndarray[Any, Any]] = {}
    for content_hash, vector in session.execute(statement):
        found.setdefault(content_hash, vector)
    return found


def upsert_document(
    session: Session,
    *,
    collection: str,
    source: str,
    title: str,
    content: str,
    content_hash: str,
    chunker: str,
    chunk_count: int,
    metadata: dict[str, Any] | None,
) -> int:
    """Insert the document row or update the one with its key (chunks untouched); returns its id."""
    row = session.execute(
        _UPSERT_DOCUMENT,
        {
            "collection": collection,
            "source": source,
            "title": title,
            "content": content,
            "content_hash": content_hash,
            "chunker": chunker,
            "chunk_count": chunk_count,
            "metadata": metadata or {},
        },
    ).one()
    return int(row[0])


def replace_document(
    session: Session,
    *,
    collection: str,
    source: str,
    title: str,
    content: str,
    content_hash: str,
    chunker: str,
    fts_config: str,
    chunks: Sequence[ChunkRow],
    metadata: dict[str, Any] | None = None,
    keywords: ChunkKeywords | None = None,
) -> tuple[int, bool]:
    """Insert or update the document and replace all its chunks; returns (id, created).

    Runs inside the caller's transaction, so readers see the old or the new version, never a mix.
    Each chunk gets ``metadata.keywords`` as ``keywords`` says (default: ``ChunkKeywords()``).
    """
    keywords = keywords or ChunkKeywords()
    with_keywords = keywords.count > 0
    # whether it is new: looked up first, since partitioned tables cannot return ``xmax`` and Citus
    # takes no subquery in an INSERT (writers of one collection never overlap: ``db.locks``)
    existing = session.execute(
        select(Document.id).where(Document.collection == collection, Document.source == source)
    ).scalar()
    document_id = upsert_document(
        session,
        collection=collection,
        source=source,
        title=title,
        content=content,
        content_hash=content_hash,
        chunker=chunker,
        chunk_count=len(chunks),
        metadata=metadata,
    )
    created = existing is None
    if not created:
        # the old contexts go (their postings cascade, the trigger uncounts them); written anew below
        contexts.delete_contexts(session, collection=collection, document_ids=[document_id])
        old = session.scalars(
            delete(DocumentChunk)
            .where(DocumentChunk.collection == collection, DocumentChunk.document_id == document_id)
            .returning(DocumentChunk.id)
        ).all()
        graph.forget_chunks(session, collection=collection, chunk_ids=old)  # the old chunks' edges go with them
    if chunks:
        statement = _insert_chunk(keywords=with_keywords, keywords_in_bm25=with_keywords and keywords.in_bm25)
        extra = (
            {
                "self_count": 1,
                "keyword_count": keywords.count,
                "bm25_k1": float(keywords.bm25_k1),
                "bm25_b": float(keywords.bm25_b),
            }
            if with_keywords
            else {}
        )
        session.execute(
            statement,
            [
                {
                    "document_id": document_id,
                    "collection": collection,
                    "chunk_index": c.chunk_index,
                    "chunk_type": c.chunk_type,
                    "content": c.content,
                    "parent_content": c.parent_content,
                    "parent_start": c.parent_start,
                    "parent_end": c.parent_end,
                    "headers": c.headers,
                    "header_path": c.header_path,
                    "start_char": c.start_char,
                    "end_char": c.end_char,
                    "token_count": c.token_count,
                    "content_hash": c.content_hash,
                    "embedding": c.embedding,
                    "fts_config": fts_config,
                    "search_prefix": keyword_prefix(title, c.header_path, c.lead, c.content, chunker=chunker),
                    "metadata": c.metadata,
                    **extra,
                }
                for c in chunks
            ],
        )
        contexts.write_contexts(session, collection=collection, document_ids=[document_id], fts_config=fts_config)
    return document_id, created


def documents_in_scope(session: Session, *, collection: str, prefixes: Sequence[str] | None) -> list[StoredDocument]:
    """Documents of ``collection`` whose source equals a prefix or lies below it (for --prune), with their origins.

    ``prefixes=None``: every document of the collection, in one scan.
    """
    columns = select(Document.id, Document.source, Document.content_hash, Document.chunker, Document.origin)
    found: dict[int, StoredDocument] = {}
    if prefixes is None:
        rows = session.execute(columns.where(Document.collection == collection))
        found.update((row[0], StoredDocument(*row)) for row in rows)
    for prefix in prefixes or ():
        below = prefix.rstrip("/") + "/"
        rows = session.execute(
            columns.where(
                Document.collection == collection,
                (Document.source == prefix) | Document.source.startswith(below, autoescape=True),
            )
        )
        for row in rows:
            found[row[0]] = StoredDocument(*row)
    return sorted(found.values(), key=lambda d: d.source)


def delete_documents(session: Session, *, collection: str, ids: Sequence[int]) -> int:
    """Delete documents of ``collection`` (their chunks cascade, their graph edges are deleted first)."""
    if not ids:
        return 0
    graph.forget_documents(session, collection=collection, document_ids=ids)
    result = session.execute(delete(Document).where(Document.collection == collection, Document.id.in_(list(ids))))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class StoredText:
    """A stored document's text, for ``reindex --all``."""

    id: int
    collection: str
    source: str
    title: str
    content: str
    chunker: str
    metadata: dict[str, Any]


def collection_names(session: Session) -> list[str]:
    """The names of the collections that hold documents, sorted."""
    return list(session.scalars(select(Document.collection).distinct().order_by(Document.collection)))


def count_documents(session: Session, *, collections: Sequence[str]) -> int:
    """How many documents these collections hold."""
    if not collections:
        return 0
    query = select(func.count()).select_from(Document).where(Document.collection.in_(list(collections)))
    return int(session.scalar(query) or 0)


def iter_stored_texts(
    session: Session,
    *,
    collection: str,
    by_id: bool = False,
    after_id: int | None = None,
    limit: int | None = None,
) -> Iterator[StoredText]:
    """The stored documents of ``collection``, ordered by source, or (``by_id``) by id, the order they were first
    written: all, or ``limit`` of them after id ``after_id``."""
    query = (
        select(
            Document.id,
            Document.collection,
            Document.source,
            Document.title,
            Document.content,
            Document.chunker,
            Document.meta,
        )
        .where(Document.collection == collection)
        .order_by(Document.id if by_id else Document.source)
        .limit(limit)
    )
    if after_id is not None:
        query = query.where(Document.id > after_id)
    for row in session.execute(query):
        yield StoredText(*row)
