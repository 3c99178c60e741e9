"""Ingestion: files -> chunks -> vectors -> rows, incremental and atomic per document.

Documents are keyed by (collection, source). A document whose text and chunker settings are unchanged
is skipped before any embedding. Changed documents are chunked, their chunk texts looked up by content
hash so stored vectors are reused, the rest embedded in large batches across documents (the model is
the bottleneck), and each batch is then written in one transaction with a savepoint per document:
readers see a document's old or new version, a failing document keeps its old version and is
reported, and the commit is synchronous, so a document the report counts as written is durable.
Every document that is not durably written is in the report as failed, with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db import documents as repo
from rag_service.db.collections import validate_collection
from rag_service.db.database import Database
from rag_service.db.index_settings import check_index_settings
from rag_service.db.locks import reindex_lock
from rag_service.db.model_switch import ModelSwitch, begin_model_switch, check_vectors_writable, end_model_switch
from rag_service.db.partitions import prepare_collection
from rag_service.db.statistics import refresh_after_write
from rag_service.embed import Embedder, degraded_note
from rag_service.errors import DocumentReadError, EmbeddingMismatchError, RagError, first_line
from rag_service.ingest.chunk import ChunkedDocument
from rag_service.ingest.chunkers import OWN_SIZES, chunker_fingerprint, make_chunker, resolve_strategy
from rag_service.ingest.graph import GraphBuilder, GraphReport, timed_rebuild
from rag_service.ingest.loaders import discover, load_document
from rag_service.ingest.pdftext import with_pages
from rag_service.ingest.progress import Progress, ProgressListener
from rag_service.ingest.report import FileProblem, IngestReport
from rag_service.ingest.summary import SummaryWriter
from rag_service.llm import ChatModel
from rag_service.records import from_fields
from rag_service.shutdown import deferred_stop, interrupted

if TYPE_CHECKING:
    import numpy as np

#: chunks gathered across documents before one call to the embedding model
EMBED_BATCH_CHUNKS = 1024

#: stored documents ``reindex_all`` holds in memory at a time
REINDEX_PAGE_DOCUMENTS = 500


def content_hash(text: str) -> str:
    """sha256 of the text, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _checkout_holding(resolved: Path, known: dict[Path, Path | None] | None) -> Path | None:
    """The nearest folder at or above ``resolved`` holding ``.git`` (a checkout's root), if any; ``known``
    memoises folders already looked at (one run's files share their folders)."""
    walked: list[Path] = []
    found: Path | None = None
    folder = resolved
    while known is None or folder not in known:  # one step for a file whose folder was seen
        walked.append(folder)
        if os.path.exists(folder / ".git"):  # False, not an error, where the path cannot be looked at
            found = folder
            break
        if folder.parent == folder:
            break
        folder = folder.parent
    else:
        found = known[folder]
    if known is not None:
        known.update((folder, found) for folder in walked)
    return found


#: the source key of the folder sources are relative to (the checkout root or ``root``)
ROOT_SOURCE = "."


def source_for(path: Path, root: Path | None = None, *, known: dict[Path, Path | None] | None = None) -> str:
    """The stored source key of a file or folder, the same from any working directory (POSIX style).

    Relative to ``root`` when given, else to the checkout holding it (the nearest folder above with
    ``.git``); a path outside both is stored absolute. So ``rag reindex docs/`` from a checkout's root
    and ``rag reindex .`` from ``docs/`` name the same files the same way.
    """
    resolved = path.resolve()
    folder = resolved if os.path.isdir(resolved) else resolved.parent  # an unreadable folder is keyed too
    base = root.resolve() if root is not None else _checkout_holding(folder, known)
    if base is not None and resolved.is_relative_to(base):
        return resolved.relative_to(base).as_posix()
    return resolved.as_posix()


def _below_any(source: str, folders: Sequence[str]) -> bool:
    """Whether ``source`` is one of ``folders`` or lies below one (``"."`` holds every source)."""
    return any(f == ROOT_SOURCE or source == f or source.startswith(f.rstrip("/") + "/") for f in folders)


def legacy_source_for(path: Path) -> str | None:
    """The key versions before issue 13 stored: relative to the working directory, when inside it."""
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    return resolved.relative_to(cwd).as_posix() if resolved.is_relative_to(cwd) and resolved != cwd else None


def _metadata_suffix(metadata: dict[str, Any]) -> str:
    """Part of the stored chunker fingerprint, so a metadata change counts as a change."""
    return ":" + content_hash(json.dumps(metadata, sort_keys=True))[:12] if metadata else ""


#: keys of ``documents.metadata`` that ingestion writes itself; the rest is the caller's ``metadata``
GENERATED_METADATA_KEYS = ("summary", "summary_source")


def user_metadata(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored document's metadata without what ingestion generated (what its caller passed)."""
    return {k: v for k, v in stored.items() if k not in GENERATED_METADATA_KEYS}


@dataclass(slots=True)
class _Pending:
    """A document chunked and waiting for vectors."""

    source: str
    title: str
    text: str
    content_hash: str
    chunker: str
    chunked: ChunkedDocument
    existed: bool
    metadata: dict[str, Any]
    chunk_hashes: list[str]  # content_hash of each chunk's embedded text, in chunk order
    embed_texts: list[str]  # what the model encodes for each chunk: its search prefix and its text
    edges: int = 0  # chunk-graph edges written with it
    graph_seconds: float = 0.0


class Indexer:
    """Indexes files (or stored texts) into one collection."""

    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        settings: Settings,
        *,
        chat: ChatModel | None = None,
        graph: GraphBuilder | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.settings = settings
        self._fingerprints: dict[str, str] = {}  # per strategy: asked once per file, unchanged files too
        self.graph = graph if graph is not None else GraphBuilder()
        self.chat = chat if settings.llm_summaries else None
        self.keywords = repo.ChunkKeywords(
            count=settings.chunk_keywords,
            in_bm25=settings.keywords_in_bm25,
            bm25_k1=settings.bm25_k1,
            bm25_b=settings.bm25_b,
        )

    def summary_writer(self) -> SummaryWriter:
        """The summary writer of one run (the LLM's when configured, else extractive)."""
        return SummaryWriter(sentences=self.settings.summary_sentences, chat=self.chat)

    # -- public entry points -------------------------------------------------------------------------

    def index_paths(
        self,
        paths: Sequence[str | Path],
        *,
        collection: str = "default",
        strategy: str | None = None,
        prune: bool = False,
        force: bool = False,
        progress: bool = False,
        metadata: dict[str, Any] | None = None,
        root: str | Path | None = None,
    ) -> IngestReport:
        """Index files and folders; unchanged documents are skipped unless ``force``.

        A file's document is keyed by ``source_for(path, root)``: its path relative to ``root``, or
        to the checkout holding it (``.git``), else its absolute path; never the working directory.
        Documents stored under the old working-directory-relative key are re-keyed when met.
        ``metadata`` (a JSON object) is stored on every document of this call; ``filters={"metadata":
        {...}}`` selects by containment. Changing it alone re-writes the documents.
        """
        validate_collection(collection)
        if strategy is not None:
            self._fingerprint(strategy)  # unknown strategies fail before any work
        report = IngestReport(collection=collection)
        started = time.perf_counter()
        base = Path(root) if root is not None else None
        found = discover([Path(p) for p in paths])
        files = found.files
        report.skipped = [FileProblem(source_for(p, base), reason) for p, reason in found.skipped]
        roots: dict[Path, Path | None] = {}
        sources = {p: source_for(p, base, known=roots) for p in files}
        with _reported_if_stopped(report, started), reindex_lock(self.db.engine, collection):
            self._guard(collection)
            written = report.chunks_written
            with Progress(total=len(files), enabled=progress, label=f"indexing {collection}") as bar:
                batch = _Batch(self, collection, report, bar, metadata=metadata)
                batch.look_up(sources)
                for path in files:
                    batch.add_file(path, sources[path], strategy=strategy, force=force)
                batch.finish()
            if prune:
                report.deleted = self._prune(
                    collection,
                    scope=[source_for(Path(p), base) for p in paths],
                    seen=set(sources.values()),
                    unreadable=[source_for(p, base) for p in found.unreadable],
                )
            self._refresh_statistics(collection, report.chunks_written - written)
        report.seconds = time.perf_counter() - started
        return report

    def _prune(self, collection: str, *, scope: list[str], seen: set[str], unreadable: list[str]) -> int:
        """Delete the documents in ``scope`` whose files were not seen; returns how many.

        A scope of ``"."`` (the checkout root or ``--root`` itself) holds every relative source of the
        collection (absolute ones lie outside it). Documents at or below an ``unreadable`` folder are
        kept: their files may well exist.
        """
        whole = ROOT_SOURCE in scope
        folders = [f for f in scope if f != ROOT_SOURCE]
        with self.db.transaction() as session:
            repo.commit_synchronously(session)
            gone = [
                d.id
                for d in repo.documents_in_scope(session, collection=collection, prefixes=None if whole else scope)
                if d.source not in seen
                and (_below_any(d.source, folders) or (whole and not d.source.startswith("/")))
                and not _below_any(d.source, unreadable)
            ]
            return repo.delete_documents(session, collection=collection, ids=gone)

    def index_texts(
        self,
        items: Iterable[tuple[str, str, str]],
        *,
        collection: str,
        strategy: str = "recursive",
        force: bool = False,
        progress: bool = False,
        total: int | None = None,
        metadata: dict[str, Any] | None = None,
        listener: ProgressListener | None = None,
    ) -> IngestReport:
        """Index in-memory documents given as (source, title, text) with one strategy.

        ``listener(done, total)`` hears ``total`` at the start and each document as its batch commits.
        """
        validate_collection(collection)
        self._fingerprint(strategy)
        report = IngestReport(collection=collection)
        started = time.perf_counter()
        with _reported_if_stopped(report, started), reindex_lock(self.db.engine, collection):
            self._guard(collection)
            with Progress(total=total, enabled=progress, label=f"indexing {collection}", listener=listener) as bar:
                batch = _Batch(self, collection, report, bar, metadata=metadata)
                for source, title, text in items:
                    batch.add_text(source, title, text, strategy=strategy, force=force)
                batch.finish()
            self._refresh_statistics(collection, report.chunks_written)
        report.seconds = time.perf_counter() - started
        return report

    def reindex_all(
        self,
        *,
        collection: str | None = None,
        progress: bool = False,
        listener: ProgressListener | None = None,
        switch_model: bool = False,
    ) -> IngestReport:
        """Re-chunk and re-embed every stored document from its stored text (current settings).

        Each collection's texts are read only once its reindex lock is held (a page of
        ``REINDEX_PAGE_DOCUMENTS`` at a time), so a write or delete committed before the lock is
        never undone by an older copy of the text. ``listener(done, total)`` hears each document
        finished (the HTTP API's job progress); ``total`` is counted at the start.

        With ``switch_model`` (``rag reindex --all``), where the stored vectors are of another model of
        the same dimension or a switch of models is unfinished, every collection is switched to the
        embedder's model (``db.model_switch``); without, such a database is refused as by any write.
        """
        switch: ModelSwitch | None = None
        if switch_model:
            with self.db.transaction() as session:  # committed before the first vector and the listing below
                switch = begin_model_switch(
                    session,
                    model_id=self.embedder.model_id,
                    dim=self.embedder.dim,
                    fts_config=self.settings.fts_config,
                    every_collection=collection is None,
                )
        with self.db.transaction() as session:
            names = [collection] if collection is not None else repo.collection_names(session)
            total = repo.count_documents(session, collections=names)
        collections = names or ["default"]
        report = IngestReport(collection=collection or ",".join(collections))
        report.model_switch = switch.unfinished() if switch is not None else ""
        started = time.perf_counter()
        with (
            _reported_if_stopped(report, started),
            Progress(total=total, enabled=progress, label="reindexing", listener=listener) as bar,
        ):
            for name in collections:
                with reindex_lock(self.db.engine, name):
                    self._guard(name, switching=switch is not None)
                    written = report.chunks_written
                    batch = _Batch(self, name, report, bar, reuse_vectors=False)
                    for doc in self._stored_texts(name):
                        strategy = doc.chunker.split(":", 1)[0]
                        batch.add_text(
                            doc.source,
                            doc.title,
                            doc.content,
                            strategy=strategy,
                            force=True,
                            metadata=user_metadata(doc.metadata),
                        )
                    batch.finish()
                    self._refresh_statistics(name, report.chunks_written - written)
            if switch is not None and report.ok:
                self._end_switch(switch, report)
        report.seconds = time.perf_counter() - started
        return report

    def _end_switch(self, switch: ModelSwitch, report: IngestReport) -> None:
        with self.db.transaction() as session:
            if end_model_switch(session, switch):
                report.model_switch = switch.finished()

    def _stored_texts(self, collection: str) -> Iterator[repo.StoredText]:
        """The collection's stored texts by source, a page per short transaction (call under its lock)."""
        after: str | None = None
        while True:
            with self.db.transaction() as session:
                page = list(
                    repo.iter_stored_texts(session, collection=collection, after=after, limit=REINDEX_PAGE_DOCUMENTS)
                )
            yield from page
            if len(page) < REINDEX_PAGE_DOCUMENTS:
                return
            after = page[-1].source

    def build_graph(self, *, collection: str | None = None) -> GraphReport:
        """Rebuild the chunk graph of one collection (or of all) from what is stored; embeds nothing.

        For collections indexed before the graph existed (migration 0006), or after its settings
        changed. Each collection is rebuilt in one transaction under its reindex lock.
        """
        with self.db.transaction() as session:
            names = repo.collection_names(session) if collection is None else [validate_collection(collection)]
        report = GraphReport()
        for name in names:
            with reindex_lock(self.db.engine, name), self.db.transaction() as session:
                documents = ((d.id, d.source, d.content) for d in repo.iter_stored_texts(session, collection=name))
                one = timed_rebuild(session, self.graph, collection=name, documents=list(documents))
            report.collections.append(name)
            report.documents += one.documents
            report.edges_written += one.edges_written
            report.seconds += one.seconds
        return report

    # -- helpers used by _Batch ----------------------------------------------------------------------

    def _guard(self, collection: str, *, switching: bool = False) -> None:
        """Refuse another model's vectors (``switching``: but for a switch to this one under way);
        create the collection's partitions (when partitioned)."""
        with self.db.transaction() as session:
            check_index_settings(
                session,
                model_id=self.embedder.model_id,
                dim=self.embedder.dim,
                fts_config=self.settings.fts_config,
                record=True,
                switching=switching,
            )
            prepare_collection(session, collection)  # a short transaction: a new partition locks the parents

    def _refresh_statistics(self, collection: str, chunks_written: int) -> None:
        """Planner statistics after a run that created or largely rewrote ``collection`` (issue 23)."""
        with self.db.transaction() as session:
            refresh_after_write(session, collection=collection, chunks_written=chunks_written)

    def _sizes(self, strategy: str) -> dict[str, Any]:
        if resolve_strategy(strategy) in OWN_SIZES:  # tokens, or whole definitions: not RAG_CHUNK_SIZE
            return {"chunk_size": None, "chunk_overlap": None}
        return {"chunk_size": self.settings.chunk_size, "chunk_overlap": self.settings.chunk_overlap}

    def _fingerprint(self, strategy: str) -> str:
        if strategy not in self._fingerprints:
            make_chunker(strategy, **self._sizes(strategy), embedder=self.embedder)  # validates
            self._fingerprints[strategy] = chunker_fingerprint(strategy, **self._sizes(strategy))
        return self._fingerprints[strategy]

    def _chunk(self, strategy: str, text: str, source: str) -> tuple[ChunkedDocument, float]:
        """The document's chunks and the seconds the model spent inside chunking (``semantic`` only)."""
        model = _TimedEmbedder(self.embedder)
        chunker = make_chunker(strategy, **self._sizes(strategy), source=source, embedder=model)
        chunked = chunker.split(text)
        if source.lower().endswith(".pdf"):
            chunked.chunks = with_pages(text, chunked.chunks)
        return chunked, model.seconds


@contextmanager
def _reported_if_stopped(report: IngestReport, started: float) -> Iterator[None]:
    """A stop signal ends the run carrying its report: what was written (each document is in its old
    or its new version, never half-written: every batch is one transaction)."""
    try:
        yield
    except KeyboardInterrupt as stop:
        report.seconds = time.perf_counter() - started
        raise interrupted(stop, report) from None


class _TimedEmbedder:
    """The embedder as a chunker sees it, timed: the ``semantic`` strategy's sentence vectors are model
    time, so the report counts them as embedding, and chunking stays the splitting itself."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started

    def embed_query(self, text: str) -> np.ndarray[Any, Any]:
        return self.inner.embed_query(text)


class _Batch:
    """Collects chunked documents, embeds them together, writes each batch in one transaction."""

    def __init__(
        self,
        indexer: Indexer,
        collection: str,
        report: IngestReport,
        bar: Progress,
        *,
        reuse_vectors: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.metadata = dict(metadata or {})
        self.indexer = indexer
        self.collection = collection
        self.report = report
        self.bar = bar
        self.reuse_vectors = reuse_vectors
        self.pending: list[_Pending] = []
        self.pending_chunks = 0
        self._model = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag-embed")
        self._inflight: tuple[Any, ...] | None = None
        self._known: dict[str, repo.StoredDocument | None] = {}
        self.summaries = indexer.summary_writer()

    def look_up(self, sources: dict[Path, str]) -> None:
        """Fetch what is stored for these files in one query, instead of one round trip per document.

        A file not stored under its key but under the working-directory-relative key of earlier
        versions has that document re-keyed (counted in ``report.rekeyed``), not indexed twice.
        """
        keys = list(sources.values())
        with self.indexer.db.transaction() as session:
            found = repo.find_documents(session, collection=self.collection, sources=keys)
            legacy = {
                old: new
                for path, new in sources.items()
                if new not in found and (old := legacy_source_for(path)) is not None and old != new
            }
            if legacy:
                for old, doc in repo.find_documents(session, collection=self.collection, sources=list(legacy)).items():
                    repo.rename_document(session, collection=self.collection, document_id=doc.id, source=legacy[old])
                    found[legacy[old]] = repo.StoredDocument(doc.id, legacy[old], doc.content_hash, doc.chunker)
                    self.report.rekeyed += 1
        self._known.update((source, found.get(source)) for source in keys)

    def add_file(self, path: Path, source: str, *, strategy: str | None, force: bool) -> None:
        try:
            loaded = load_document(path, max_bytes=self.indexer.settings.max_file_bytes)
        except RagError as exc:
            self._fail(source, str(exc))
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
            self._fail(source, str(exc))
        if self.pending_chunks >= EMBED_BATCH_CHUNKS:
            self.flush()

    def _prepare(
        self, source: str, title: str, text: str, *, strategy: str, force: bool, metadata: dict[str, Any]
    ) -> None:
        if "\x00" in text:
            raise DocumentReadError("contains NUL bytes, which PostgreSQL text cannot store; remove them")
        strategy = resolve_strategy(strategy, source)
        digest = content_hash(text)
        embed_format = ":eh" if self.indexer.settings.embed_headers else ""
        embed_format += ":kw" if self.indexer.keywords.in_bm25 and self.indexer.keywords.count > 0 else ""
        fingerprint = (
            f"{self.indexer._fingerprint(strategy)}:{repo.INDEX_FORMAT}{embed_format}{_metadata_suffix(metadata)}"
        )
        if source in self._known:
            existing = self._known.pop(source)
        else:
            with self.indexer.db.transaction() as session:
                existing = repo.find_document(session, collection=self.collection, source=source)
        if existing and not force and existing.content_hash == digest and existing.chunker == fingerprint:
            self.report.unchanged += 1
            self.bar.advance(chunks=0)
            return
        started = time.perf_counter()
        chunked, model_seconds = self.indexer._chunk(strategy, text, source)
        self.report.chunking_seconds += time.perf_counter() - started - model_seconds
        self.report.embedding_seconds += model_seconds
        metadata = {**user_metadata(metadata), **self.summaries.metadata(text)}
        embed_texts = [self._embed_text(title, c.header_path, c.content) for c in chunked.chunks]
        hashes = [content_hash(t) for t in embed_texts]
        self.pending.append(
            _Pending(
                source, title, text, digest, fingerprint, chunked, existing is not None, metadata, hashes, embed_texts
            )
        )
        self.pending_chunks += len(chunked.chunks)

    def _embed_text(self, title: str, header_path: str, content: str) -> str:
        """The text whose vector a chunk gets: with ``embed_headers``, a chunk under headers gets its title
        and header path first (as BM25 sees them); chunks without headers embed their text alone."""
        embed_prefix = self.indexer.settings.embed_headers and header_path
        prefix = repo.search_prefix(title, header_path) if embed_prefix else ""
        return f"{prefix}\n{content}" if prefix else content

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
            if self.reuse_vectors:
                with self.indexer.db.transaction() as session:
                    found = repo.stored_embeddings(session, collection=self.collection, hashes=list(texts))
            self.report.embeddings_reused += sum(1 for p in pending for h in p.chunk_hashes if h in found)
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
        self.report.degraded.extend(self.summaries.degraded())
        if note := degraded_note(self.indexer.embedder):
            self.report.degraded.append(f"embed: {note}")

    def _embed(self, texts: list[str]) -> tuple[np.ndarray[Any, Any], float]:
        started = time.perf_counter()
        vectors = self.indexer.embedder.embed_documents(texts)
        return vectors, time.perf_counter() - started

    def _complete(
        self,
        pending: list[_Pending],
        found: dict[str, np.ndarray[Any, Any]],
        missing: list[str],
        future: Future[tuple[np.ndarray[Any, Any], float]] | None,
    ) -> None:
        if future is not None:
            try:
                encoded, seconds = future.result()
            except Exception as exc:  # a model failure fails these documents, not the run
                for doc in pending:
                    self._fail(doc.source, f"embedding failed: {type(exc).__name__}: {exc}")
                return
            self.report.embedding_seconds += seconds
            self.report.chunks_embedded += len(missing)
            found = {**found, **dict(zip(missing, encoded, strict=True))}
        self._write_all(pending, found)

    def _write_all(self, pending: list[_Pending], vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        """One transaction for the batch, a savepoint per document, a synchronous commit.

        A document that fails rolls back to its savepoint alone (it keeps its previous version and is
        reported); the rest commit together, so the batch costs one commit instead of one per
        document. If the batch's transaction itself fails (a lost connection, a failed commit), none
        of its documents changed and every one not already reported is reported as failed. The
        commit is synchronous (also where the role or database turned ``synchronous_commit`` off),
        so whatever the report calls written survives a server crash. A stop signal (SIGINT, SIGTERM)
        arriving meanwhile takes effect once the batch is committed and counted.
        """
        with deferred_stop():  # a stop signal waits for this commit and its counting: the report stays exact
            self._write_batch(pending, vectors)

    def _write_batch(self, pending: list[_Pending], vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        written: list[_Pending] = []
        reported: set[int] = set()
        try:
            with self.indexer.db.transaction() as session:
                repo.commit_synchronously(session)
                check_vectors_writable(session, model_id=self.indexer.embedder.model_id)  # a switch began meanwhile
                for doc in pending:
                    try:
                        with session.begin_nested():
                            self._write(session, doc, vectors)
                    except DBAPIError as exc:  # this document keeps its previous version; the run goes on
                        if exc.connection_invalidated:
                            raise
                        self._fail(doc.source, f"could not be written ({first_line(exc)})")
                        reported.add(id(doc))
                        continue
                    written.append(doc)
        except Exception as exc:  # the batch's transaction failed: none of these documents changed
            reason = f"could not be written ({first_line(exc)}); run the reindex again"
            reason = str(exc) if isinstance(exc, EmbeddingMismatchError) else reason
            for doc in pending:
                if id(doc) not in reported:
                    self._fail(doc.source, reason)
            return
        for doc in written:
            if doc.existed:
                self.report.updated += 1
            else:
                self.report.added += 1
            self.report.chunks_written += len(doc.chunked.chunks)
            self.report.edges_written += doc.edges
            self.report.graph_seconds += doc.graph_seconds
            self.report.add_filtered(doc.chunked.filtered)
            self.bar.advance(chunks=len(doc.chunked.chunks))

    def _write(self, session: Session, doc: _Pending, vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        rows = [
            from_fields(repo.ChunkRow, c, content_hash=h, embedding=vectors[h])
            for h, c in zip(doc.chunk_hashes, doc.chunked.chunks, strict=True)
        ]
        document_id, _ = repo.replace_document(
            session,
            collection=self.collection,
            source=doc.source,
            title=doc.title,
            content=doc.text,
            content_hash=doc.content_hash,
            chunker=doc.chunker,
            fts_config=self.indexer.settings.fts_config,
            chunks=rows,
            metadata=doc.metadata,
            keywords=self.indexer.keywords,
        )
        started = time.perf_counter()
        edges = self.indexer.graph.build(
            session, collection=self.collection, document_id=document_id, source=doc.source, text=doc.text
        )
        doc.edges, doc.graph_seconds = edges, time.perf_counter() - started

    def _fail(self, source: str, reason: str) -> None:
        self.report.failed.append(FileProblem(source, reason))
        self.bar.advance(chunks=0)
