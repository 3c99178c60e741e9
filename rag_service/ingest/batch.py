"""One run's batches: chunked documents gathered, embedded together, written in transactions of whole documents.

Chunks are gathered across documents into calls of up to ``EMBED_BATCH_CHUNKS``, vectors held already are
reused by the hash of the text they embed (``vector_sources``), and writing batch N overlaps with embedding batch
N+1. A batch is written in transactions of whole documents, about ``WRITE_CHUNKS`` chunks each, with a savepoint per
document: readers see a document's old or new version, a failing document keeps its old version and is
reported, and each commit is synchronous, so a document the report counts as written is durable. A bulk load
(``bulkwrite``) keeps these guarantees with one transaction for the whole run: all or nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db import documents as repo
from rag_service.db.bulk import StagedDocument
from rag_service.db.chunk_text import embedded_text
from rag_service.db.database import Database, as_database_error
from rag_service.db.locks import RunLock
from rag_service.db.model_switch import check_vectors_writable
from rag_service.embed import Embedder, degraded_note
from rag_service.errors import (
    DatabaseError,
    EmbeddingMismatchError,
    GeneratedFileError,
    LockLostError,
    RagError,
    first_line,
)
from rag_service.ingest.chunk import TextChunk
from rag_service.ingest.chunkers import resolve_strategy
from rag_service.ingest.chunking import Chunking
from rag_service.ingest.embedclock import EmbedClock
from rag_service.ingest.fingerprint import content_hash
from rag_service.ingest.former_keys import rekey_former_documents
from rag_service.ingest.graph import GraphBuilder
from rag_service.ingest.loaders import load_document
from rag_service.ingest.metadata_policy import document_metadata
from rag_service.ingest.pending import PendingDocument, count_written, write_groups
from rag_service.ingest.progress import Progress
from rag_service.ingest.report import FileProblem, IngestReport, file_reason
from rag_service.ingest.storable import check_storable
from rag_service.ingest.stored_summaries import StoredSummaries
from rag_service.ingest.summary import SummaryWriter
from rag_service.ingest.vector_sources import VectorSource
from rag_service.records import from_fields
from rag_service.shutdown import deferred_stop

if TYPE_CHECKING:
    import numpy as np

    from rag_service.ingest.bulkwrite import BulkWriter

#: chunks gathered across documents before one call to the embedding model
EMBED_BATCH_CHUNKS = 1024
#: chunks per call within a batch, so the progress bar moves while the batch is embedded
EMBED_PROGRESS_CHUNKS = 256
#: chunks per write transaction (whole documents; one larger document alone). Every chunk updates its lexemes'
#: rows of ``lexeme_stats`` and its collection's ``collection_stats`` row, and inside one transaction each update
#: adds a version that later lookups walk past: 1,024 chunks in one transaction wrote 300 SciFact documents in
#: 19.7 s against 12.1 s in transactions of 128 (32: 13.9, the commits' cost)
WRITE_CHUNKS = 128
#: how a failed document's line ends when its previous version stays stored and searchable
KEPT = "; its previous version stays indexed"


class Batch:
    """Collects chunked documents of one collection, embeds them together, writes each batch in one
    transaction, and counts it all in ``report``; ``finish()`` once at the end of the run."""

    def __init__(
        self,
        collection: str,
        report: IngestReport,
        bar: Progress,
        *,
        db: Database,
        embedder: Embedder,
        settings: Settings,
        chunking: Chunking,
        keywords: repo.ChunkKeywords,
        graph: GraphBuilder,
        summaries: SummaryWriter,
        vectors: VectorSource | None = None,
        metadata: dict[str, Any] | None = None,
        bulk: BulkWriter | None = None,
        lock: RunLock | None = None,
    ) -> None:
        self.bulk = bulk  # a new collection's run as one bulk load (``bulkwrite``) instead of a commit per batch
        self.lock = lock  # the run's collection lock, checked before each commit: no writes once it is lost
        self._staged: list[PendingDocument] = []
        #: texts this run embedded whose first written chunk is not counted yet (the report counts what it wrote)
        self._embedded_unwritten: set[str] = set()
        self.metadata = dict(metadata or {})
        self.collection = collection
        self.report = report
        self.bar = bar
        self.db = db
        self.embedder = embedder
        self.settings = settings
        self.chunking = chunking
        self.keywords = keywords
        self.graph = graph
        self.summaries = summaries
        # the stored summaries: kept for unchanged text, or asked again
        self.stored_summaries = StoredSummaries(db, collection, summaries, lock)
        self.vectors = vectors  # where vectors are found instead of embedded (None: every text is embedded)
        self.pending: list[PendingDocument] = []
        self.pending_chunks = 0
        self._model = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-embed")
        self.clock = EmbedClock(report)  # the model's seconds, settled at the end or when a stop signal ends the run
        self._inflight: tuple[Any, ...] | None = None
        self._known: dict[str, repo.StoredDocument | None] = {}

    def look_up(self, files: dict[Path, tuple[str, str | None]]) -> None:
        """Fetch what is stored for these files (each one's key and origin) in one query, instead of one round
        trip per document; a file stored under an earlier key has that document re-keyed (``former_keys``),
        counted in ``report.rekeyed``, not indexed twice."""
        keys = [key for key, _ in files.values()]
        with self.db.transaction() as session:
            found = repo.find_documents(session, collection=self.collection, sources=keys)
            missing = {path: keyed for path, keyed in files.items() if keyed[0] not in found}
            rekeyed = rekey_former_documents(session, self.collection, missing, current=set(keys))
            found.update(rekeyed)
            self.report.rekeyed += len(rekeyed)
            self.stored_summaries.look_up(session, list(found.values()))
        self._known.update((source, found.get(source)) for source in keys)

    def add_file(self, path: Path, source: str, *, strategy: str | None, force: bool) -> None:
        """Load the file and add its text (``add_text``); an unreadable file is reported as failed, a minified or
        generated one as skipped (left out on purpose: nothing to mend)."""
        try:
            loaded = load_document(path, max_bytes=self.settings.max_file_bytes)
        except GeneratedFileError as exc:
            self.report.skipped.append(FileProblem(source, file_reason(path, str(exc))))  # a stored version: left_out
            self.bar.advance(chunks=0, items=1)
            return
        except RagError as exc:
            self._fail(source, file_reason(path, str(exc)), stored=self._known.get(source) is not None)
            return
        self.add_text(source, loaded.title, loaded.text, strategy=resolve_strategy(strategy, path), force=force)

    def add_text(
        self,
        source: str,
        title: str,
        text: str,
        *,
        strategy: str,
        force: bool,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Chunk a document unless it is stored unchanged (or ``force``); embedded and written in its batch.

        ``metadata`` (the caller's) replaces the batch's for this document; a failure is reported.
        """
        stored = self._known.get(source) is not None  # a failure keeps its stored version (if looked up)
        try:
            self._prepare(
                source,
                title,
                text,
                strategy=strategy,
                force=force,
                metadata=self.metadata if metadata is None else metadata,
            )
        except RagError as exc:
            self._fail(source, str(exc), stored=stored)
        except SQLAlchemyError:  # a database failure not mapped to a DatabaseError ends the run, as before
            raise
        except Exception as exc:  # an error of our own met on this document fails it alone, named by its type
            self._fail(source, f"could not be indexed ({first_line(exc, typed=True)}): a bug; report it", stored=stored)
        if self.pending_chunks >= EMBED_BATCH_CHUNKS:
            self.flush()

    def _prepare(
        self, source: str, title: str, text: str, *, strategy: str, force: bool, metadata: dict[str, Any]
    ) -> None:
        check_storable(source, title, text)
        strategy = resolve_strategy(strategy, source)
        digest = content_hash(text)
        fingerprint = self.chunking.fingerprint(strategy, metadata)
        if source in self._known:
            existing = self._known.pop(source)
        else:
            with self.db.transaction() as session:
                existing = repo.find_document(session, collection=self.collection, source=source)
        if existing and not force and existing.content_hash == digest and existing.chunker == fingerprint:
            self.report.unchanged += 1
            self.bar.advance(chunks=0)
            self.stored_summaries.retry(existing, text)
            return
        started = time.perf_counter()
        chunked, model_seconds = self.chunking.split(strategy, text, source, title)
        self.report.chunking_seconds += time.perf_counter() - started - model_seconds
        self.report.embedding_seconds += model_seconds
        self.report.unreadable_chunks += chunked.unreadable
        metadata = document_metadata(metadata, text, self.summaries, stored=self.stored_summaries.of(existing, digest))
        embed_texts = [self._embed_text(title, c) for c in chunked.chunks]
        hashes = [content_hash(t) for t in embed_texts]
        self.pending.append(
            PendingDocument(
                source, title, text, digest, fingerprint, chunked, existing is not None, metadata, hashes, embed_texts
            )
        )
        self.pending_chunks += len(chunked.chunks)

    def _embed_text(self, title: str, chunk: TextChunk) -> str:
        """The text whose vector a chunk gets: with ``embed_headers``, a chunk under headers gets its title,
        header path and lead first (as BM25 sees them); chunks without headers, their lead (if any) and text."""
        if not self.settings.embed_headers:
            return chunk.content
        return embedded_text(title, chunk.header_path, chunk.content, chunk.lead)

    def flush(self) -> None:
        """Start embedding everything pending, then write the previous batch while the model runs.

        The model is the bottleneck, so writing batch N (PostgreSQL's work: rows, HNSW, BM25 triggers)
        overlaps with embedding batch N+1 on a worker thread. Stored vectors are looked up here, on
        the caller's thread, since a test's database connection must not be shared between threads.
        """
        if self.pending:
            pending, self.pending, self.pending_chunks = self.pending, [], 0
            texts = {h: t for p in pending for h, t in zip(p.chunk_hashes, p.embed_texts, strict=True)}
            found: dict[str, np.ndarray[Any, Any]] = {}
            if self.vectors is not None:
                try:
                    with self.db.transaction() as session:
                        found = self.vectors.look_up(session, list(texts))
                except DatabaseError as exc:  # the server went away: these documents fail, as in a batch's write
                    self._fail_all(pending, self._write_failure(exc))
                    pending, texts = [], {}
            missing = [h for h in texts if h not in found]
            future = self._model.submit(self._embed, [texts[h] for h in missing]) if missing else None
            inflight, self._inflight = self._inflight, (pending, found, missing, future)
        else:
            inflight, self._inflight = self._inflight, None
        if inflight is not None:
            self._complete(*inflight)

    def finish(self) -> None:
        """Write everything still pending or being embedded; call once at the end of a run."""
        self.flush()
        self.flush()
        self._model.shutdown(wait=True)
        self.clock.settle()
        if self.bulk is not None:
            self._commit_bulk(self.bulk)
        self.report.degraded.extend(self.summaries.degraded())
        if note := degraded_note(self.embedder):
            self.report.degraded.append(f"embed: {note}")

    def _embed(self, texts: list[str]) -> np.ndarray[Any, Any]:
        import numpy as np  # loaded by the model already; not at import (a cold ``rag query`` needs none)

        parts = []
        with self.clock.running():
            for start in range(0, len(texts), EMBED_PROGRESS_CHUNKS):
                parts.append(self.embedder.embed_documents(texts[start : start + EMBED_PROGRESS_CHUNKS]))
                self.bar.embedded(len(parts[-1]))
        return np.concatenate(parts)

    def _complete(
        self,
        pending: list[PendingDocument],
        found: dict[str, np.ndarray[Any, Any]],
        missing: list[str],
        future: Future[np.ndarray[Any, Any]] | None,
    ) -> None:
        if future is not None:
            try:
                encoded = future.result()
            except Exception as exc:  # a model failure fails these documents, not the run
                self._fail_all(pending, f"embedding failed: {type(exc).__name__}: {exc}")
                return
            self._embedded_unwritten.update(missing)
            embedded = dict(zip(missing, encoded, strict=True))
            if self.vectors is not None:
                self.vectors.keep(self.db, embedded)
            found = {**found, **embedded}
        self._write_all(pending, found)

    def _write_all(self, pending: list[PendingDocument], vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        """The batch in transactions of about ``WRITE_CHUNKS`` chunks, a savepoint per document, each commit
        synchronous.

        A document that fails rolls back to its savepoint alone (it keeps its previous version and is
        reported); the rest of its transaction commits together, so a transaction costs one commit instead
        of one per document. If a transaction itself fails (a lost connection, a failed commit), none of
        its documents changed and every one not already reported is reported as failed. The commit is
        synchronous (also where the role or database turned ``synchronous_commit`` off), so whatever the
        report calls written survives a server crash. A stop signal (SIGINT, SIGTERM) arriving meanwhile
        takes effect once the transaction is committed and counted. A bulk load stages the whole batch.
        """
        groups = [pending] if self.bulk is not None else write_groups(pending, WRITE_CHUNKS)
        for group in groups:
            with deferred_stop():  # a stop signal waits for this commit and its counting: the report stays exact
                self._write_batch(group, vectors)

    def _write_batch(self, pending: list[PendingDocument], vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        if self.bulk is not None:
            self._stage(self.bulk, pending, vectors)
            return
        written: list[PendingDocument] = []
        reported: set[int] = set()
        try:
            with self.db.transaction() as session:
                repo.commit_synchronously(session)
                check_vectors_writable(session, model_id=self.embedder.model_id)  # a switch began meanwhile
                for doc in pending:
                    try:
                        with session.begin_nested():
                            self._write(session, doc, vectors)
                    except DBAPIError as exc:  # this document keeps its previous version; the run goes on
                        if exc.connection_invalidated:
                            raise
                        self._fail_all([doc], self._write_failure(exc))
                        reported.add(id(doc))
                        continue
                    written.append(doc)
                if self.lock is not None:
                    self.lock.check(session)
        except Exception as exc:  # the batch's transaction failed: none of these documents changed
            if isinstance(exc, LockLostError):
                self._stop(exc, [doc for doc in pending if id(doc) not in reported])
            if isinstance(exc, EmbeddingMismatchError):
                reason = str(exc)
            elif isinstance(exc, DatabaseError):  # one line already, naming the fix (a full disk, a lost server)
                reason = self._write_failure(exc)
            else:
                reason = f"could not be written ({first_line(exc)}); run the reindex again"
            self._fail_all([doc for doc in pending if id(doc) not in reported], reason)
            return
        for doc in written:
            count_written(self.report, doc, self._embedded_unwritten)
            self.report.edges_written += doc.edges
            self.report.graph_seconds += doc.graph_seconds
        if written:
            self.bar.advance(chunks=sum(len(doc.chunked.chunks) for doc in written), items=len(written))

    def _stop(self, lost: LockLostError, unwritten: list[PendingDocument]) -> None:
        """End the run whose lock was lost, before it writes anything more; the line says what stayed."""
        self._model.shutdown(wait=False, cancel_futures=True)
        self._fail_all(unwritten, f"not written: {lost}")
        written = self.report.added + self.report.updated
        raise LockLostError(
            f"{lost}, so it stopped: the {written} document(s) it wrote stay written, the rest keep their previous "
            "versions; run it again (a run that took the lock meanwhile must finish first)"
        ) from lost

    def _stage(
        self, bulk: BulkWriter, pending: list[PendingDocument], vectors: dict[str, np.ndarray[Any, Any]]
    ) -> None:
        """Stage the batch in the bulk load (counted as written only once the load commits)."""
        staged = [
            StagedDocument(d.source, d.title, d.text, d.content_hash, d.chunker, self._rows(d, vectors), d.metadata)
            for d in pending
        ]
        try:
            bulk.add(staged)
        except (DBAPIError, EmbeddingMismatchError) as exc:  # these documents are left out of the load
            reason = str(exc) if isinstance(exc, RagError) else self._write_failure(exc)
            self._fail_all(pending, reason)
            return
        self._staged.extend(pending)
        for doc in pending:
            self.bar.advance(chunks=len(doc.chunked.chunks))  # rows loaded; the report counts them at the commit

    def _commit_bulk(self, bulk: BulkWriter) -> None:
        """Write what is staged (a stop signal meanwhile rolls it all back), then commit and count it (a
        stop signal waits for that, as for a batch's commit: the report stays exact)."""
        try:
            edges, seconds = bulk.write(self.bar.phase)
            with deferred_stop():
                bulk.commit()
                for doc in self._staged:
                    count_written(self.report, doc, self._embedded_unwritten)
                self.report.edges_written += edges
                self.report.graph_seconds += seconds
        except Exception as exc:  # nothing of the load was written
            reason = (
                f"the bulk load of collection {self.collection!r} failed ({first_line(exc)}); nothing was written "
                "and the collection is as it was: run it again"
            )
            self.report.failed.extend(FileProblem(doc.source, reason) for doc in self._staged)

    def _rows(self, doc: PendingDocument, vectors: dict[str, np.ndarray[Any, Any]]) -> list[repo.ChunkRow]:
        return [
            from_fields(repo.ChunkRow, c, content_hash=h, embedding=vectors[h])
            for h, c in zip(doc.chunk_hashes, doc.chunked.chunks, strict=True)
        ]

    def _write(self, session: Session, doc: PendingDocument, vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        rows = self._rows(doc, vectors)
        document_id, _ = repo.replace_document(
            session,
            collection=self.collection,
            source=doc.source,
            title=doc.title,
            content=doc.text,
            content_hash=doc.content_hash,
            chunker=doc.chunker,
            fts_config=self.settings.fts_config,
            chunks=rows,
            metadata=doc.metadata,
            keywords=self.keywords,
        )
        started = time.perf_counter()
        edges = self.graph.build(
            session, collection=self.collection, document_id=document_id, source=doc.source, text=doc.text
        )
        doc.edges, doc.graph_seconds = edges, time.perf_counter() - started

    def _write_failure(self, exc: DBAPIError | DatabaseError) -> str:
        """A document's write failure as the report shows it: the fix, where the library knows one (a
        ``DatabaseError`` is one line already, naming it)."""
        mapped = exc if isinstance(exc, DatabaseError) else as_database_error(exc, url=self.db.url_for_display)
        return f"could not be written: {mapped}" if mapped is not None else f"could not be written ({first_line(exc)})"

    def _fail(self, source: str, reason: str, *, stored: bool = False) -> None:
        self._fail_all([source], reason + KEPT if stored else reason)

    def _fail_all(self, failed: Sequence[str | PendingDocument], reason: str) -> None:
        """Report ``failed`` (sources, or documents: a stored one's line says it keeps its previous version), all
        before the progress hears them (a stop it raises then loses none)."""
        self.report.failed.extend(
            FileProblem(f, reason) if isinstance(f, str) else FileProblem(f.source, reason + KEPT * f.existed)
            for f in failed
        )
        if failed:
            self.bar.advance(chunks=0, items=len(failed))
