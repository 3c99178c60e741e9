"""Ingestion: files -> chunks -> vectors -> rows, incremental and atomic per document.

Documents are keyed by (collection, source) (``source_keys``). A document whose text and fingerprint
(``fingerprint``) are unchanged is skipped before any embedding. Changed documents are chunked and
gathered into batches (``batch``) that embed across documents and write each batch in one
transaction; a run of many documents into an empty collection is one bulk load instead
(``bulkwrite``). Every run holds its collection's reindex lock. Every document that is not durably
written is in the report as failed, with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal

from rag_service.config import Settings
from rag_service.db import documents as repo
from rag_service.db import packed_postings
from rag_service.db.bulk import eligible as bulk_eligible
from rag_service.db.collections import validate_collection
from rag_service.db.database import Database
from rag_service.db.index_settings import check_index_settings
from rag_service.db.locks import RunLock, reindex_lock
from rag_service.db.model_switch import ModelSwitch, begin_model_switch, end_model_switch
from rag_service.db.partitions import drop_if_empty, prepare_collection
from rag_service.db.statistics import refresh_after_graph_rebuild, refresh_after_write, settle_after_write
from rag_service.embed import Embedder
from rag_service.errors import DatabaseError
from rag_service.ingest.batch import Batch
from rag_service.ingest.bulkwrite import BULK_MIN_DOCUMENTS, BulkWriter
from rag_service.ingest.call_checks import check_call, checked_paths, text_items
from rag_service.ingest.chunking import Chunking
from rag_service.ingest.embedclock import reported_if_stopped
from rag_service.ingest.fingerprint import fingerprint_strategy
from rag_service.ingest.graph import GraphBuilder, GraphReport, timed_rebuild
from rag_service.ingest.loaders import discover, given_text, text_title
from rag_service.ingest.metadata_policy import user_metadata
from rag_service.ingest.origins import claim_keys, record_new, record_texts
from rag_service.ingest.passed_over import FOLDER_KINDS
from rag_service.ingest.progress import Progress, ProgressListener
from rag_service.ingest.prune import prune_unseen
from rag_service.ingest.repeated import repeated_source
from rag_service.ingest.report import FileProblem, IngestReport
from rag_service.ingest.source_keys import check_root, keyed_source, source_for
from rag_service.ingest.storable import storable_key, storable_names
from rag_service.ingest.summary import SummaryWriter
from rag_service.ingest.vector_sources import StoredVectors, SwitchVectors, VectorSource
from rag_service.llm import ChatModel

_log = logging.getLogger(__name__)
#: why packing was unavailable, each said once a process
_PACKING_REPORTED: set[str] = set()

#: stored documents ``reindex_all`` holds in memory at a time
REINDEX_PAGE_DOCUMENTS = 500


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
        self.chunking = Chunking(settings, embedder)
        self.bulk_min_documents = BULK_MIN_DOCUMENTS
        self.graph = graph if graph is not None else GraphBuilder(exact_below=settings.exact_search_below)
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
        """Index files and folders; unchanged documents are skipped unless ``force`` (then re-chunked, and a
        chunk whose embedded text is stored keeps its vector: only changed text is embedded).

        A file's document is keyed by ``source_for(path, root)``: its path relative to ``root``, or
        to the checkout holding it (``.git``), else its absolute path; never the working directory.
        Documents stored under the old working-directory-relative key are re-keyed when met.
        ``metadata`` (a JSON object) is stored on every document of this call; ``filters={"metadata":
        {...}}`` selects by containment. Changing it alone re-writes the documents.
        """
        validate_collection(collection)
        if isinstance(paths, str | Path):  # a string was walked letter by letter ("." of "./x": the whole folder)
            paths = [paths]
        check_call(paths, metadata)
        paths = checked_paths(paths)
        if root is not None:
            check_root(root, paths)
        if strategy is not None:
            self.chunking.check(strategy)  # unknown strategies fail before any work
        report = IngestReport(collection=collection)
        started = time.perf_counter()
        base = Path(root) if root is not None else None
        found = discover([Path(p) for p in paths])
        files = found.files
        report.skipped = [FileProblem(source_for(p, base, follow_link=False), reason) for p, reason in found.skipped]
        report.passed_over = {
            kind: sorted(source_for(p, base, follow_link=False) + ("/" if kind in FOLDER_KINDS else "") for p in passed)
            for kind, passed in found.passed_over.items()
        }
        report.degraded += [f"gitignore: {problem}" for problem in found.problems]
        roots: dict[Path, Path | None] = {}
        keyed = {p: keyed_source(p, base, known=roots) for p in files}  # (key, origin)
        keyed, report.failed = storable_names(keyed)
        sources = {p: key for p, (key, _) in keyed.items()}
        with reported_if_stopped(report, started) as clocks, reindex_lock(self.db.engine, collection) as lock:
            self._guard(collection)
            files, new = claim_keys(self.db, collection, keyed, report)
            written = report.chunks_written
            with (
                self._bulk_writer(collection, documents=len(files)) as bulk,
                Progress(total=len(files), enabled=progress, label=f"indexing {collection}") as bar,
            ):
                batch = self._batch(collection, report, bar, metadata=metadata, bulk=bulk, lock=lock)
                clocks.append(batch.clock)
                batch.look_up(keyed)
                seen: dict[str, str] = {}
                for path in files:
                    if not repeated_source(sources[path], seen, report, bar, path=str(path)):  # two checkouts
                        batch.add_file(path, sources[path], strategy=strategy, force=force)
                batch.finish()
            record_new(self.db, collection, (keyed[p] for p in new), report)
            prune_unseen(  # without ``prune``, the report names what it would delete
                self.db,
                report,
                scope=[kept for kept in (keyed_source(Path(p), base) for p in paths) if storable_key(kept[0])],
                # a file skipped as minified is not indexed any more: its stored version is left out, as if passed over
                seen=set(sources.values()) - {skipped.source for skipped in report.skipped},
                unreadable=[source_for(p, base) for p in found.unreadable],
                delete=prune,
            )
            self._refresh_statistics(collection, report.chunks_written - written, report)
        report.seconds = time.perf_counter() - started
        return report

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
        check_call(items, metadata)
        items = text_items(items)  # a malformed list item is refused before any work
        self.chunking.check(strategy)
        report = IngestReport(collection=collection)
        started = time.perf_counter()
        with reported_if_stopped(report, started) as clocks, reindex_lock(self.db.engine, collection) as lock:
            self._guard(collection)
            with (
                self._bulk_writer(collection, documents=total) as bulk,
                Progress(total=total, enabled=progress, label=f"indexing {collection}", listener=listener) as bar,
            ):
                batch = self._batch(collection, report, bar, metadata=metadata, bulk=bulk, lock=lock)
                clocks.append(batch.clock)
                seen: dict[str, str] = {}
                for source, title, given in items:
                    if not repeated_source(source, seen, report, bar):
                        text, markup_title = given_text(given, strategy)  # HTML markup: as an .html file's
                        title = title or markup_title or (text_title(text, strategy) if isinstance(text, str) else "")
                        batch.add_text(source, title, text, strategy=strategy, force=force)
                batch.finish()
            record_texts(self.db, collection, seen, report)
            self._refresh_statistics(collection, report.chunks_written, report)
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

        With ``switch_model`` (``rag reindex --all``), where the stored vectors are of another model (of
        any dimension HNSW takes) or a switch of models is unfinished, every collection is switched to the
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
        # the graph as a first index writes it (``GraphBuilder.replay``); while the columns hold vectors of two sizes
        # there is no HNSW index to find neighbours with, and no distance between the sizes: the similarity edges are
        # written once the switch has ended
        graph = dataclasses.replace(self.graph, replay=True)
        # a switch keeps each vector as it embeds it, so a run stopped midway does not embed it again; a plain
        # reindex embeds every text again
        vectors = SwitchVectors(switch.to_model) if switch is not None else None
        if switch is not None and switch.resizes:
            graph = dataclasses.replace(graph, neighbours=0)
        started = time.perf_counter()
        with (
            reported_if_stopped(report, started) as clocks,
            Progress(total=total, enabled=progress, label="reindexing", listener=listener) as bar,
        ):
            for name in collections:
                with reindex_lock(self.db.engine, name) as lock:
                    self._guard(name, switching=switch is not None)
                    written = report.chunks_written
                    with self._bulk_writer(name, documents=self._count(name), replace=True, graph=graph) as bulk:
                        batch = self._batch(name, report, bar, vectors=vectors, bulk=bulk, graph=graph, lock=lock)
                        clocks.append(batch.clock)
                        for doc in self._stored_texts(name):
                            batch.add_text(
                                doc.source,
                                doc.title,
                                doc.content,
                                strategy=fingerprint_strategy(doc.chunker),
                                force=True,
                                metadata=user_metadata(doc.metadata),
                            )
                        batch.finish()
                    self._refresh_statistics(name, report.chunks_written - written, report)
            if switch is not None and report.ok:
                self._end_switch(switch, report, bar.phase)
        report.seconds = time.perf_counter() - started
        return report

    def _end_switch(self, switch: ModelSwitch, report: IngestReport, phase: Callable[[str], None]) -> None:
        with self.db.transaction() as session:
            if not end_model_switch(session, switch, dim=self.embedder.dim, phase=phase):
                return
        report.model_switch = switch.finished()
        if switch.resizes and self.graph.neighbours > 0:
            phase("similarity edges of every collection")
            rebuilt = self.build_graph()
            report.edges_written += rebuilt.edges_written
            report.graph_seconds += rebuilt.seconds

    def _count(self, collection: str) -> int:
        with self.db.transaction() as session:
            return repo.count_documents(session, collections=[collection])

    def _stored_texts(self, collection: str) -> Iterator[repo.StoredText]:
        """The collection's stored texts in the order they were first written (id: a bulk load replays that
        order, ``db.bulk_replace``), a page per short transaction (call under its lock)."""
        after: int | None = None
        while True:
            with self.db.transaction() as session:
                page = list(
                    repo.iter_stored_texts(
                        session, collection=collection, by_id=True, after_id=after, limit=REINDEX_PAGE_DOCUMENTS
                    )
                )
            yield from page
            if len(page) < REINDEX_PAGE_DOCUMENTS:
                return
            after = page[-1].id

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
            with self.db.transaction() as session:
                refresh_after_graph_rebuild(session)
            report.collections.append(name)
            report.documents += one.documents
            report.edges_written += one.edges_written
            report.seconds += one.seconds
        return report

    # -- helpers -------------------------------------------------------------------------------------

    def _batch(
        self,
        collection: str,
        report: IngestReport,
        bar: Progress,
        *,
        vectors: VectorSource | Literal["stored"] | None = "stored",
        metadata: dict[str, Any] | None = None,
        bulk: BulkWriter | None = None,
        graph: GraphBuilder | None = None,
        lock: RunLock | None = None,
    ) -> Batch:
        """A batch writing into ``collection`` with this indexer's parts (``graph``: another graph builder) and a
        new summary writer; it checks the run's ``lock`` before each commit. ``vectors``: where vectors are found
        instead of embedded ("stored": the stored chunks'; None: nowhere)."""
        return Batch(
            collection,
            report,
            bar,
            db=self.db,
            embedder=self.embedder,
            settings=self.settings,
            chunking=self.chunking,
            keywords=self.keywords,
            graph=graph or self.graph,
            summaries=self.summary_writer(),
            vectors=StoredVectors(collection) if vectors == "stored" else vectors,
            metadata=metadata,
            bulk=bulk,
            lock=lock,
        )

    def _bulk_writer(
        self, collection: str, *, documents: int | None, replace: bool = False, graph: GraphBuilder | None = None
    ) -> AbstractContextManager[BulkWriter | None]:
        """A bulk load (``ingest.bulkwrite``) for a run of at least ``bulk_min_documents`` documents into a
        collection that holds none, or (``replace``) rewriting that many of its stored documents, where
        ``db.bulk.eligible`` allows it; else the row path (None)."""
        if documents is None or documents < self.bulk_min_documents:
            return nullcontext()
        with self.db.transaction() as session:
            if bulk_eligible(session, collection=collection, keywords=self.keywords, replace=replace) is not None:
                return nullcontext()
        return BulkWriter(
            self.db,
            collection=collection,
            fts_config=self.settings.fts_config,
            keywords=self.keywords,
            graph=graph or self.graph,
            model_id=self.embedder.model_id,
            replace=replace,
        )

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

    def _refresh_statistics(self, collection: str, chunks_written: int, report: IngestReport) -> None:
        """Planner statistics after a run that created or largely rewrote ``collection`` (issue 23), and a VACUUM
        of the tables read index-only; then its packed postings (``db.packed_postings``), packed again once enough
        changed. A database failure here is a ``degraded`` line of the report: what the run wrote stays written."""
        try:
            self._refresh(collection, chunks_written)
        except DatabaseError as exc:
            report.degraded.append(
                f"statistics: not refreshed after this run's writes ({exc}); searches of {collection!r} may be "
                "planned on stale statistics until autovacuum analyses its tables"
            )

    def _refresh(self, collection: str, chunks_written: int) -> None:
        with self.db.transaction() as session:  # pruned or never written: an empty collection keeps no partitions
            drop_if_empty(session, collection)
        with self.db.transaction() as session:
            analysed = refresh_after_write(session, collection=collection, chunks_written=chunks_written)
        if analysed:
            settle_after_write(self.db, collection)
        done = packed_postings.refresh(self.db, collection, min_chunks=self.settings.bm25_packed_min_chunks)
        if done.action == "unavailable" and done.reason not in _PACKING_REPORTED:
            _PACKING_REPORTED.add(done.reason)
            _log.warning("collection %r keeps the bounded BM25 arm: %s", collection, done.reason)
