"""The bulk first index: a new collection loaded with COPY, its BM25 statistics counted once, set-based.

``BulkLoad`` runs in ONE transaction, the caller's. ``add_documents`` COPYs a batch's documents into
``documents`` (ids drawn from its sequence in write order, as the row path's upserts draw them) and
their chunks into a staging table (``db.bulk_staging``). ``finish`` tokenizes the staged chunks once
(on parallel workers where it can) and moves them into ``document_chunks`` with one ``INSERT ... SELECT``
(ids in staging order) whose ``RETURNING`` feeds ``chunk_terms`` in the same statement, then counts
``lexeme_stats`` and ``collection_stats`` with one statement each, with the two statistics triggers disabled meanwhile.
When ``document_chunks`` held no row at all (a first index on a plain table), the secondary indexes
of ``document_chunks``, ``chunk_terms`` and ``context_terms``, both postings tables' primary keys and the
context postings' reference to their contexts are dropped first and built (or checked once) after the
load with ``index_memory``; otherwise (a new collection beside others, or a partitioned
table) the indexes are kept and maintained during the insert. A failure anywhere rolls the whole
load back: the database is as it was.

The end state is the row path's (``tests/integration/test_bulk_index.py`` compares every table): the
keywords of chunk k are computed against the statistics of the chunks staged before it plus itself,
as the row path computes them at write time. What it costs in locks, while ``finish`` runs: the
statistics trigger is disabled (``ALTER TABLE ... DISABLE TRIGGER``: SHARE ROW EXCLUSIVE), so writers
of other collections wait for the commit while readers go on; a first index on an empty table also
drops indexes (ACCESS EXCLUSIVE), so readers of the (empty) table wait too. Callers decide when a
load is eligible (``eligible``): a collection without documents, not on Citus (row triggers there).
``replace=True`` (``rag reindex --all``) rewrites stored documents instead, keeping their ids: their old rows
are cleared in ``finish`` once the lock is held (``db.bulk_replace``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg.sql import SQL, Composable, Identifier
from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.db.bulk_keywords import one_pass_available, stage_keywords
from rag_service.db.bulk_replace import clear_replaced
from rag_service.db.bulk_staging import Staging
from rag_service.db.chunk_text import keyword_prefix
from rag_service.db.contexts import TSV_LENGTH, write_collection_contexts
from rag_service.db.documents import ChunkKeywords, ChunkRow, upsert_document

#: ``maintenance_work_mem`` per chunk for the index builds after a load: pgvector builds the HNSW graph
#: in memory while it fits (a 384-d vector and its neighbour lists take ~2 kB) and on disk, far slower,
#: after; the btree sorts of the postings take what is left
INDEX_MEMORY_PER_CHUNK = 4096


def index_memory(chunks: int) -> str:
    """``maintenance_work_mem`` for building the indexes of ``chunks`` chunks: 4 kB a chunk, at least
    64 MB, at most a quarter of the machine's memory (shared_buffers takes another quarter)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    wanted = max(64 << 20, chunks * INDEX_MEMORY_PER_CHUNK)
    return f"{min(wanted, total // 4) >> 20}MB"


_STAGE_COLUMNS = (
    "seq",
    "document_id",
    "chunk_index",
    "chunk_type",
    "content",
    "parent_content",
    "parent_start",
    "parent_end",
    "headers",
    "header_path",
    "start_char",
    "end_char",
    "token_count",
    "content_hash",
    "embedding",
    "search_prefix",
    "metadata",
)
_STAGE_TYPES = (
    "int8",
    "int8",
    "int4",
    "text",
    "text",
    "text",
    "int4",
    "int4",
    "jsonb",
    "text",
    "int4",
    "int4",
    "int4",
    "text",
    "vector",
    "text",
    "jsonb",
)
_COPY_STAGE = "COPY bulk_chunks (" + ", ".join(_STAGE_COLUMNS) + ") FROM STDIN WITH (FORMAT BINARY)"
_NEXT_DOCUMENT_IDS = text("SELECT nextval(pg_get_serial_sequence('documents', 'id')) FROM generate_series(1, :n)")
_COPY_DOCUMENTS = (
    "COPY documents (id, collection, source, title, content, content_hash, chunker, chunk_count, metadata) FROM STDIN"
)
_UNSTAGE_DOCUMENT = text("DELETE FROM bulk_chunks WHERE document_id = :document_id")
_STORED_IDS = text(
    "SELECT source, id FROM documents WHERE collection = :collection AND source = ANY(CAST(:sources AS text[]))"
)
# a replaced document's row, updated in place as the row path's upsert updates it (``documents.upsert_document``)
_UPDATE_DOCUMENT = (
    "UPDATE documents SET title = %s, content = %s, content_hash = %s, chunker = %s, chunk_count = %s, "
    "metadata = %s, updated_at = now() WHERE collection = %s AND id = %s"
)

# the chunks in staging order (ids drawn in the row path's order) with their tsvectors (``bulk_vectors``)
# and, in the same statement, their postings (what the trigger of migrations 0002/0005 would write), from
# the rows just inserted rather than a second read of the table
_MOVE_CHUNKS_SQL = (
    "WITH moved AS ("
    "INSERT INTO document_chunks (document_id, collection, chunk_index, chunk_type, content, parent_content, "
    "parent_start, parent_end, headers, header_path, start_char, end_char, token_count, content_hash, embedding, "
    "content_tsv, lexeme_count, metadata) "
    "SELECT b.document_id, :collection, b.chunk_index, b.chunk_type, b.content, b.parent_content, b.parent_start, "
    "b.parent_end, b.headers, b.header_path, b.start_char, b.end_char, b.token_count, b.content_hash, "
    "b.embedding, t.tsv, " + TSV_LENGTH.format(tsv="t.tsv") + ", "
    "CASE WHEN k.keywords IS NULL THEN b.metadata ELSE b.metadata || jsonb_build_object('keywords', k.keywords) END "
    "FROM bulk_chunks b JOIN bulk_vectors t ON t.seq = b.seq LEFT JOIN bulk_keywords k ON k.seq = b.seq "
    "ORDER BY b.seq "
    "RETURNING id, collection, content_tsv, lexeme_count) "
    "INSERT INTO chunk_terms (chunk_id, collection, lexeme, tf, doc_len) "
    "SELECT m.id, m.collection, u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1), m.lexeme_count "
    "FROM moved m, unnest(m.content_tsv) AS u"
)
_MOVE_CHUNKS = text(_MOVE_CHUNKS_SQL)

_LEXEME_STATS = text(
    "INSERT INTO lexeme_stats AS s (collection, lexeme, doc_freq) "
    "SELECT collection, lexeme, count(*) FROM chunk_terms WHERE collection = :collection GROUP BY 1, 2 "
    "ON CONFLICT (collection, lexeme) DO UPDATE SET doc_freq = s.doc_freq + EXCLUDED.doc_freq"
)
_COLLECTION_STATS = text(
    "INSERT INTO collection_stats AS s (collection, chunk_count, total_length) "
    "SELECT collection, count(*), sum(lexeme_count) FROM document_chunks WHERE collection = :collection GROUP BY 1 "
    "ON CONFLICT (collection) DO UPDATE SET chunk_count = s.chunk_count + EXCLUDED.chunk_count, "
    "total_length = s.total_length + EXCLUDED.total_length"
)

_IS_EMPTY = text("SELECT NOT EXISTS (SELECT 1 FROM document_chunks)")
_LOCK = text("LOCK TABLE document_chunks, chunk_terms IN SHARE ROW EXCLUSIVE MODE")
_DISABLE_STATS = text(
    "ALTER TABLE document_chunks DISABLE TRIGGER document_chunks_stats_insert, "
    "DISABLE TRIGGER document_chunks_lexeme_count"
)
_ENABLE_STATS = text(
    "ALTER TABLE document_chunks ENABLE TRIGGER document_chunks_stats_insert, "
    "ENABLE TRIGGER document_chunks_lexeme_count"
)
# the contexts' row trigger (migration 0013) counted once, set-based, as the chunks' statistics are
_DISABLE_CONTEXT_STATS = text("ALTER TABLE document_contexts DISABLE TRIGGER document_contexts_stats")
_ENABLE_CONTEXT_STATS = text("ALTER TABLE document_contexts ENABLE TRIGGER document_contexts_stats")
_CONTEXT_STATS = text(
    "INSERT INTO context_stats AS s (collection, context_count, context_length) "
    "SELECT collection, count(*), sum(length) FROM document_contexts WHERE collection = :collection GROUP BY 1 "
    "ON CONFLICT (collection) DO UPDATE SET context_count = s.context_count + EXCLUDED.context_count, "
    "context_length = s.context_length + EXCLUDED.context_length"
)
# secondary indexes (not backing a constraint) and the postings' primary keys: rebuilt after a first load
_SECONDARY_INDEXES = text(
    "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE i.indrelid IN ('document_chunks'::regclass, 'chunk_terms'::regclass, 'context_terms'::regclass) "
    "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) ORDER BY 1"
)
_POSTINGS_KEY = text(
    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE conrelid = 'chunk_terms'::regclass AND contype = 'p'"
)
# the context postings' key and their reference to their context (checked by a trigger per row: 8 us
# each, 47M rows at 1M chunks), dropped and re-added as the chunk postings' key: key first, then reference
_CONTEXT_POSTINGS_CONSTRAINTS = text(
    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE conrelid = 'context_terms'::regclass AND contype IN ('p', 'f') ORDER BY contype DESC, conname"
)
_HAS_CITUS = text("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
_IS_PARTITIONED = text("SELECT relkind = 'p' FROM pg_class WHERE oid = 'document_chunks'::regclass")
_HOLDS_DOCUMENTS = text("SELECT EXISTS (SELECT 1 FROM documents WHERE collection = :collection)")

Phase = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class StagedDocument:
    """One document of a bulk load, as ``documents.replace_document`` takes it."""

    source: str
    title: str
    content: str
    content_hash: str
    chunker: str
    chunks: Sequence[ChunkRow]
    metadata: dict[str, Any] = field(default_factory=dict)


def eligible(session: Session, *, collection: str, keywords: ChunkKeywords, replace: bool = False) -> str | None:
    """Why ``collection`` cannot be bulk-loaded (None: it can): it holds documents (unless the load
    ``replace``s them), keywords are indexed in BM25 (each chunk's tsvector then depends on the keywords
    of the chunks before it), or Citus."""
    if session.execute(_HAS_CITUS).scalar_one():
        return "Citus keeps its statistics with row triggers"
    if keywords.count > 0 and keywords.in_bm25:
        return "keywords in BM25 make each chunk's tsvector depend on the chunks before it"
    if not replace and session.execute(_HOLDS_DOCUMENTS, {"collection": collection}).scalar_one():
        return "the collection holds documents"
    return None


class BulkLoad:
    """Stages one new collection's documents in the caller's transaction; ``finish`` writes the rest.

    Call ``start`` once, ``add_document`` per document (in write order), then ``finish``, all in one
    transaction of ``session``; the caller commits it (synchronously) or rolls it back.
    """

    def __init__(
        self, session: Session, *, collection: str, fts_config: str, keywords: ChunkKeywords, replace: bool = False
    ) -> None:
        self.session = session
        self.collection = collection
        self.replace = replace  # stored documents are replaced, keeping their ids (``db.bulk_replace``)
        self.fts_config = fts_config
        self.keywords = keywords
        self.chunks = 0
        self._seq = 0
        self._documents: dict[int, None] = {}  # staged document ids, in write order
        self._sources: set[str] = set()
        self.staging = Staging(session)
        self._one_pass = False  # the best lexemes by the rag_bm25 extension (``bulk_keywords.one_pass_available``)

    def start(self) -> None:
        """Create the staging table; no lock is taken on the shared tables yet."""
        from pgvector.psycopg import register_vector

        self.session.execute(text("SET LOCAL statement_timeout = 0"))
        self.session.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        self._one_pass = self.keywords.count > 0 and one_pass_available(self.session)
        self.staging.create()
        register_vector(self._raw())

    def _raw(self) -> Any:
        return self.session.connection().connection.driver_connection

    def add_documents(self, documents: Sequence[StagedDocument]) -> list[int]:
        """Stage documents in write order: their rows COPYed into ``documents`` (ids drawn from its
        sequence in order, as the row path's upserts draw them) and their chunks into staging, in a
        few round trips; returns their ids. A source staged before is upserted instead (the later
        version wins, as in the row path)."""
        from psycopg.types.json import Jsonb

        sources = [d.source for d in documents]
        if len(set(sources)) < len(sources) or not self._sources.isdisjoint(sources):
            return [self._add_again(d) for d in documents]
        stored: dict[str, int] = {}
        if self.replace:
            params = {"collection": self.collection, "sources": sources}
            stored = {source: int(i) for source, i in self.session.execute(_STORED_IDS, params).all()}
        new = [d for d in documents if d.source not in stored]
        drawn = iter(sorted(int(i) for i in self.session.execute(_NEXT_DOCUMENT_IDS, {"n": len(new)}).scalars()))
        ids = [stored[d.source] if d.source in stored else next(drawn) for d in documents]
        with self._raw().cursor() as cursor:
            if new:
                with cursor.copy(_COPY_DOCUMENTS) as copy:
                    for document_id, d in zip(ids, documents, strict=True):
                        if d.source not in stored:
                            row = (document_id, self.collection, d.source, d.title, d.content, d.content_hash)
                            copy.write_row((*row, d.chunker, len(d.chunks), Jsonb(d.metadata)))
            if stored:
                updates = [self._update_row(i, d) for i, d in zip(ids, documents, strict=True) if d.source in stored]
                cursor.executemany(_UPDATE_DOCUMENT, updates)
            self._copy_chunks(cursor, zip(ids, documents, strict=True))
        self._sources.update(sources)
        self._documents.update(dict.fromkeys(ids))
        return ids

    def _update_row(self, document_id: int, d: StagedDocument) -> tuple[Any, ...]:
        """``_UPDATE_DOCUMENT``'s parameters for a replaced document."""
        from psycopg.types.json import Jsonb

        metadata = Jsonb(d.metadata)
        return (d.title, d.content, d.content_hash, d.chunker, len(d.chunks), metadata, self.collection, document_id)

    def _add_again(self, d: StagedDocument) -> int:
        document_id = upsert_document(
            self.session,
            collection=self.collection,
            source=d.source,
            title=d.title,
            content=d.content,
            content_hash=d.content_hash,
            chunker=d.chunker,
            chunk_count=len(d.chunks),
            metadata=d.metadata,
        )
        if document_id in self._documents:  # its earlier version's chunks leave the staging
            self.session.execute(_UNSTAGE_DOCUMENT, {"document_id": document_id})
            del self._documents[document_id]
            self.chunks = int(self.session.execute(text("SELECT count(*) FROM bulk_chunks")).scalar_one())
        self._documents[document_id] = None
        self._sources.add(d.source)
        with self._raw().cursor() as cursor:
            self._copy_chunks(cursor, [(document_id, d)])
        return document_id

    def _copy_chunks(self, cursor: Any, documents: Iterable[tuple[int, StagedDocument]]) -> None:
        from psycopg.types.json import Jsonb

        with cursor.copy(_COPY_STAGE) as copy:
            copy.set_types(list(_STAGE_TYPES))
            for document_id, d in documents:
                for c in d.chunks:
                    self._seq += 1
                    copy.write_row(
                        (
                            self._seq,
                            document_id,
                            c.chunk_index,
                            c.chunk_type,
                            c.content,
                            c.parent_content,
                            c.parent_start,
                            c.parent_end,
                            Jsonb(c.headers),
                            c.header_path,
                            c.start_char,
                            c.end_char,
                            c.token_count,
                            c.content_hash,
                            c.embedding,
                            keyword_prefix(d.title, c.header_path, c.lead, c.content, chunker=d.chunker),
                            Jsonb(c.metadata),
                        )
                    )
                self.chunks += len(d.chunks)

    @property
    def document_ids(self) -> list[int]:
        """The staged documents' ids in write order."""
        return list(self._documents)

    def finish(self, phase: Phase = lambda _: None) -> dict[str, float]:
        """Keywords, rows, statistics and indexes; returns the seconds of each phase (``phase`` hears each start)."""
        import time

        timings: dict[str, float] = {}
        params = {"collection": self.collection, "fts_config": self.fts_config}

        def step(name: str, *statements: Any) -> None:
            phase(name)
            started = time.perf_counter()
            for statement in statements:
                self.session.execute(statement, params)
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - started

        phase(f"tokenize {self.chunks} chunks")
        started = time.perf_counter()
        self.staging.tokenize(self.fts_config)
        timings["tokenize"] = time.perf_counter() - started
        keywords = stage_keywords(
            self.staging, params, self.keywords, phase, chunks=self.chunks, one_pass=self._one_pass
        )
        timings.update(keywords)
        step("lock", _LOCK)
        if self.replace:
            phase(f"clear the old rows of {len(self._documents)} documents")
            started = time.perf_counter()
            clear_replaced(self.session, collection=self.collection, document_ids=self.document_ids)
            timings["clear"] = time.perf_counter() - started
        rebuilt = self._drop_indexes() if self.session.execute(_IS_EMPTY).scalar_one() else []
        step("disable statistics triggers", _DISABLE_STATS)
        step(f"insert {self.chunks} chunks and their postings", _MOVE_CHUNKS)
        self.staging.drop()
        step("lexeme statistics", _LEXEME_STATS, _COLLECTION_STATS)
        step("disable context trigger", _DISABLE_CONTEXT_STATS)
        phase("contexts")
        started = time.perf_counter()
        write_collection_contexts(
            self.session, collection=self.collection, fts_config=self.fts_config, replaced=self.replace
        )
        timings["contexts"] = time.perf_counter() - started
        step("context statistics", _CONTEXT_STATS, _ENABLE_CONTEXT_STATS)
        if rebuilt:
            self.session.execute(
                text("SELECT set_config('maintenance_work_mem', :memory, true)"), {"memory": index_memory(self.chunks)}
            )
            for label, definition in rebuilt:
                phase(label)
                started = time.perf_counter()
                self._run(definition)
                timings[label] = time.perf_counter() - started
        step("enable statistics triggers", _ENABLE_STATS)
        return timings

    def _run(self, statement: Composable) -> None:
        """A statement composed by psycopg (identifiers quoted by it), in the load's transaction."""
        with self._raw().cursor() as cursor:
            cursor.execute(statement)

    def _drop_indexes(self) -> list[tuple[str, Composable]]:
        """Drop what the load would otherwise maintain row by row (document_chunks holds no row, so
        nobody else's data is affected); returns (phase label, DDL) to restore them, the postings' keys
        and the context postings' reference (checked by one query) last."""
        if self.session.execute(_IS_PARTITIONED).scalar():
            return []  # partition indexes belong to the parent's: kept, built during the insert
        rebuilt: list[tuple[str, Composable]] = []
        for name, definition in self.session.execute(_SECONDARY_INDEXES).all():
            self._run(SQL("DROP INDEX {}").format(Identifier(name)))
            rebuilt.append((f"build index {name}", SQL(definition)))  # pg_get_indexdef: the catalog's own DDL
        keys = [("chunk_terms", *key) for key in self.session.execute(_POSTINGS_KEY).all()]  # (table, name, DDL)
        keys += [("context_terms", *key) for key in self.session.execute(_CONTEXT_POSTINGS_CONSTRAINTS).all()]
        for table, name, _ in reversed(keys):  # a reference before the key it might use
            self._run(SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(Identifier(table), Identifier(name)))
        for table, name, definition in keys:
            add = SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(Identifier(table), Identifier(name))
            label = f"check {name}" if definition.startswith("FOREIGN KEY") else f"build index {name}"
            rebuilt.append((label, add + SQL(definition)))
        return rebuilt
