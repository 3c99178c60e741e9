"""``DocumentOperations``: adding and deleting single documents, the part of ``UniversalRAGService`` (its
base class) that the HTTP API's ``/api/documents`` calls. Kept beside ``service.py`` so that one stays short.

Uploaded files are read into texts (``read_uploads``), texts are indexed one run per chunking strategy
(``index_documents``), and a document is deleted by its source (``delete_document``). The HTTP API and
Python callers go through the same methods, so each does the same thing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, cast

from rag_service.errors import ConfigurationError, RagError, UnknownCollectionError
from rag_service.ingest.call_checks import nul_in_source
from rag_service.ingest.loaders import given_text, text_title
from rag_service.ingest.report import FileProblem, IngestReport
from rag_service.ingest.storable import MAX_SOURCE_CHARS as _MAX_SOURCE_CHARS

if TYPE_CHECKING:
    from rag_service.config import Settings
    from rag_service.db.database import Database
    from rag_service.ingest.progress import ProgressListener

#: ``UniversalRAGService.index_texts``: (items, collection=, strategy=, force=, listener=) -> report
IndexTexts = Callable[..., IngestReport]

#: the longest source of a document (``ingest.storable``), for the HTTP API's schemas
MAX_SOURCE_CHARS = _MAX_SOURCE_CHARS


@dataclass(frozen=True, slots=True)
class NewDocument:
    """One document to index: ``source`` is its key in the collection (a new text of it replaces the old).

    ``strategy``: its chunking strategy (``list_strategies()``); None takes the one of the call (``auto``
    picks by the source's suffix, as for a file of that name; ``recursive`` for a source without one).
    """

    source: str
    text: str
    title: str = ""
    strategy: str | None = None


@dataclass(slots=True)
class DocumentBatch:
    """Documents ready to index, and the files that could not be read (the report lists them as failed)."""

    documents: list[NewDocument] = field(default_factory=list)
    failed: list[FileProblem] = field(default_factory=list)

    def __post_init__(self) -> None:
        _check_documents(self)  # before any work, and before the HTTP API starts a job with it

    @property
    def chars(self) -> int:
        """Characters of text in the batch (the HTTP API indexes a large batch as a job)."""
        return sum(len(document.text) for document in self.documents)


def read_uploads(
    uploads: Iterable[tuple[str, bytes]], *, uploads_root: Path, max_bytes: int, strategy: str | None
) -> DocumentBatch:
    """Each ``(file name, content)`` as a document keyed by its file name; see ``UniversalRAGService.read_uploads``."""
    from rag_service.ingest.loaders import load_document
    from rag_service.ingest.strategies import recommend_strategy
    from rag_service.uploads import staging_folder, store_upload

    batch = DocumentBatch()
    with staging_folder(uploads_root) as folder:
        for filename, data in uploads:
            path = store_upload(folder, filename, data)
            try:
                loaded = load_document(path, max_bytes=max_bytes)
            except RagError as exc:  # the staging folder is no business of the caller: name the file alone
                batch.failed.append(FileProblem(path.name, str(exc).replace(str(path), path.name)))
                continue
            chosen = strategy or recommend_strategy(path)
            batch.documents.append(NewDocument(path.name, loaded.text, loaded.title, chosen))
    _check_documents(batch)  # built by appending: a/same.md and b/same.md are both "same.md"
    return batch


def index_documents(
    index_texts: IndexTexts,
    documents: DocumentBatch | Iterable[NewDocument],
    *,
    collection: str,
    strategy: str,
    force: bool,
    listener: ProgressListener | None,
) -> IngestReport:
    """One ``index_texts`` run per strategy, merged into one report; the batch's failed files come first.
    ``auto`` is resolved per document by its source name (``resolve_strategy``), as ``index_paths`` does by path.

    ``listener(done, total)`` hears documents done of the whole batch (the failed files count as done).
    """
    from rag_service.ingest.strategies import resolve_strategy

    if isinstance(documents, DocumentBatch):
        batch = documents
        _check_documents(batch)  # a caller's batch may have been appended to since it was made
    else:
        batch = DocumentBatch(list(documents))  # checked as it is made
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for document in batch.documents:
        kind = resolve_strategy(document.strategy or strategy, document.source)
        text, markup_title = given_text(document.text, kind)  # HTML markup: stored as an .html file's text
        title = document.title or markup_title or text_title(text, kind) or PurePosixPath(document.source).stem
        groups.setdefault(kind, []).append((document.source, title, text))  # titled as a file would be
    report = IngestReport(collection=collection, failed=list(batch.failed))
    total = len(batch.failed) + len(batch.documents)
    done = len(batch.failed)
    if listener is not None:
        listener(done, total)
    hear = None if listener is None else _Shifted(listener, done, total)
    for chosen, items in groups.items():
        report.merge(index_texts(items, collection=collection, strategy=chosen, force=force, listener=hear))
        if hear is not None:
            hear.next_part(len(items))
    return report


def _check_documents(batch: DocumentBatch) -> None:
    """Refuse, before any work, a batch holding something else than ``NewDocument``s of text (a tuple, a None text:
    raw Python errors before), or naming one source twice (the second would replace the first unseen)."""
    for i, document in enumerate(batch.documents):
        if not isinstance(document, NewDocument):
            raise ConfigurationError(
                f"documents[{i}] is a {type(document).__name__}; pass NewDocument(source, text, title='') items"
            )
        if not isinstance(document.source, str) or not isinstance(document.text, str) or not document.source.strip():
            raise ConfigurationError(
                f"documents[{i}]: source {document.source!r:.60} and text must be text, the source not blank"
            )
        if nul_in_source(document.source):
            raise ConfigurationError(
                f"documents[{i}]: source {document.source!r:.60} holds a NUL, which a source cannot; remove it"
            )
    counts = collections.Counter(document.source for document in batch.documents)
    repeated = [f"{source!r} ({count} times)" for source, count in counts.items() if count > 1]
    if repeated:
        raise ConfigurationError(
            f"documents of this call share a source: {', '.join(repeated[:5])}; a collection holds one document "
            "per source, so each would replace the one before: give each document a source of its own"
        )


class _Shifted:
    """Each strategy's progress as progress of the whole batch: documents, and (for a listener that hears them,
    ``ingest.progress``) the write's phase and the chunks embedded and written."""

    def __init__(self, listen: ProgressListener, before: int, total: int) -> None:
        self.listen, self.before, self.total = listen, before, total
        self.chunks_before = self.chunks_now = (0, 0)

    def __call__(self, done: int, _part_total: int | None) -> None:
        self.listen(self.before + done, self.total)

    def phase(self, name: str) -> None:
        """The write's step, passed on."""
        if callable(heard := getattr(self.listen, "phase", None)):
            heard(name)

    def chunks(self, embedded: int, written: int) -> None:
        """One part's chunks, after the parts before it."""
        self.chunks_now = (embedded, written)
        if callable(heard := getattr(self.listen, "chunks", None)):
            heard(self.chunks_before[0] + embedded, self.chunks_before[1] + written)

    def next_part(self, documents: int) -> None:
        """The next strategy's run starts after ``documents`` more."""
        self.before += documents
        self.chunks_before = (self.chunks_before[0] + self.chunks_now[0], self.chunks_before[1] + self.chunks_now[1])
        self.chunks_now = (0, 0)


def delete_document(
    database: Database, *, collection: str, source: str, uploads_root: Path, packed_min_chunks: int = 0
) -> int:
    """Delete ``source`` of ``collection`` with its chunks and edges; see ``UniversalRAGService.delete_document``."""
    from rag_service.db.catalog import delete_by_source
    from rag_service.db.collections import require_collection, validate_collection
    from rag_service.db.locks import lock_for_edit
    from rag_service.uploads import forget_upload

    validate_collection(collection)  # None said "is being indexed"
    if not isinstance(source, str) or not source:
        raise ConfigurationError(f"source must be a document's source (text), not {source!r:.60}")
    with database.transaction() as session:
        lock_for_edit(session, collection)  # a running ingest or reindex would write the document back
        deleted = delete_by_source(session, collection=collection, source=source)
        if not deleted:
            try:
                require_collection(session, collection)  # a misspelled collection: "did you mean 'kb'?"
            except UnknownCollectionError as unknown:
                raise UnknownCollectionError(
                    f"no document {source!r} to delete: {unknown}", collection=collection, existing=unknown.existing
                ) from None
    if deleted:
        forget_upload(uploads_root, collection, source)
        _repack_after_deletes(database, collection, min_chunks=packed_min_chunks)
    return deleted


def stored_sources_like(database: Database, *, collection: str, source: str) -> list[str]:
    """The stored sources ``source`` may have meant: those of ``collection`` ending with ``/source`` (a relative
    path for a document keyed by its absolute one), for the hint of a delete that found nothing."""
    from rag_service.db.catalog import sources_ending_with

    return database.read(lambda session: sources_ending_with(session, collection=collection, path=source))


def _repack_after_deletes(database: Database, collection: str, *, min_chunks: int) -> None:
    """Drop an emptied collection's partitions; pack the collection's postings again once deletes alone passed
    ``REBUILD_SHARE`` of its snapshot (each one is a tombstone every query skips). Under the reindex lock; skipped
    when another run holds it (it does both at its end)."""
    from rag_service.db import packed_postings
    from rag_service.db.locks import reindex_lock
    from rag_service.db.partitions import drop_if_empty
    from rag_service.errors import ReindexInProgressError

    try:
        with reindex_lock(database.engine, collection):
            with database.transaction() as session:
                drop_if_empty(session, collection)
            packed_postings.refresh(database, collection, min_chunks=min_chunks)
    except ReindexInProgressError:
        pass


class DocumentOperations:
    """Add uploaded or in-memory documents, delete one, check names and filters ahead of a call; every method is
    public on ``UniversalRAGService``."""

    settings: Settings
    db: Database
    #: the service's ``index_texts``
    index_texts: IndexTexts

    def collection_name(self, collection: str) -> str:
        """``collection`` validated, spelled as stored: a name typed in the other Unicode form (an accent composed or
        decomposed) means the stored collection that looks the same (``db.collections.stored_spelling``; a probe
        only for such a name)."""
        from rag_service.db.collections import has_other_spellings, stored_spelling, validate_collection

        name = validate_collection(collection)
        return self.db.read(lambda session: stored_spelling(session, name)) if has_other_spellings(name) else name

    def check_collection_name(self, collection: str) -> str:
        """``collection`` when it is a valid name (1-200 characters, not blank); ConfigurationError otherwise."""
        from rag_service.db.collections import validate_collection

        return validate_collection(collection)

    @staticmethod
    def check_call_options(*, collection: object, filters: object) -> dict[str, Any] | None:
        """``filters`` as a dict (None stays None) when ``collection`` and ``filters`` pass the checks ``retrieve()``
        makes before any work; ConfigurationError (one line) otherwise. Static: the framework retrievers run it
        where they are built, before any service exists."""
        from rag_service.db.collections import validate_collection
        from rag_service.db.search_request import ChunkFilters

        validate_collection(collection)  # type: ignore[arg-type]  # names a non-text value's type
        if filters is None:
            return None
        ChunkFilters.parse(filters)  # type: ignore[arg-type]  # not a mapping: its own one-line error
        return dict(cast(Mapping[str, Any], filters))

    def read_uploads(self, uploads: Iterable[tuple[str, bytes]], *, strategy: str | None = None) -> DocumentBatch:
        """Uploaded files, ``(file name, content)``, as documents keyed by file name, for ``index_documents``.

        Each is staged under ``RAG_DATA_DIR/uploads/`` only while it is read. A file that cannot be read
        (its type, its size over ``RAG_MAX_FILE_BYTES``, binary) is listed in ``failed``; a name with a
        folder in it is a ConfigurationError. ``strategy``: for every file; None picks one per file type.
        """
        max_bytes = self.settings.max_file_bytes
        return read_uploads(uploads, uploads_root=self._uploads_root(), max_bytes=max_bytes, strategy=strategy)

    def index_documents(
        self,
        documents: DocumentBatch | Iterable[NewDocument],
        *,
        collection: str = "default",
        strategy: str = "auto",
        force: bool = False,
        listener: ProgressListener | None = None,
    ) -> IngestReport:
        """Index in-memory documents, or a ``read_uploads`` batch (its unread files are the report's first
        failures): one ``index_texts`` run per strategy (a document's own, else ``strategy``), one report.
        ``auto`` (the default) picks one per document by its source's suffix, as for files (``errors.md``:
        ``markdown``); a source without a known suffix gets ``recursive``.

        ``listener(done, total)`` hears the documents done of the whole call.
        """
        return index_documents(
            self.index_texts, documents, collection=collection, strategy=strategy, force=force, listener=listener
        )

    def delete_document(self, source: str, *, collection: str = "default") -> int:
        """Delete the document ``source`` of ``collection`` with its chunks; returns 1, or 0 when there is none.

        UnknownCollectionError (naming the closest collections) when the collection holds no document at all.

        ReindexInProgressError while an ingest or reindex runs on the collection (it would write it back).
        A file an older ``rag serve`` kept for the document (``uploads/<collection slug>-<hash>/``) goes with it.
        """
        return delete_document(
            self.db,
            collection=self.collection_name(collection),  # typed NFC, stored NFD: the stored one
            source=source,
            uploads_root=self._uploads_root(),
            packed_min_chunks=self.settings.bm25_packed_min_chunks,
        )

    def sources_like(self, source: str, *, collection: str = "default") -> list[str]:
        """The stored sources of ``collection`` that ``source`` may have meant (those ending with ``/source``: a
        relative path for a document keyed by its absolute one), for the hint of a delete that found nothing."""
        return stored_sources_like(self.db, collection=collection, source=source)

    def check_not_indexing(self, collection: str) -> None:
        """ReindexInProgressError while an ingest or reindex runs on ``collection`` (of any process)."""
        from rag_service.db.locks import refuse_if_running

        self.db.read(lambda session: refuse_if_running(session, collection))

    def _uploads_root(self) -> Path:
        return self.settings.data_dir / "uploads"
