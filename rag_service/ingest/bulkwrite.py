"""A new collection's run written as one bulk load (``db.bulk``): COPY, set-based statistics, indexes after.

Used instead of a transaction per batch when the run indexes at least ``BULK_MIN_DOCUMENTS`` documents
into a collection that holds none, or rewrites that many stored documents (``rag reindex --all``:
``replace``, ``db.bulk_replace``) (``Indexer``). Everything happens in ONE transaction: documents and
their chunks are staged as their batches are embedded, and at the end the chunks are moved into place,
their statistics counted once, the indexes built (a first index) and the graph edges written, document
by document in write order as the row path writes them; then the transaction commits synchronously.
A failure anywhere or a lost connection rolls it all back and reports every document of the run as
failed with the reason (one line); a stop signal before the commit rolls it back too (the report then
counts none of them as written). Readers see the collection empty until the commit, then whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from types import TracebackType

from sqlalchemy.orm import Session

from rag_service.db import documents as repo
from rag_service.db.bulk import BulkLoad, StagedDocument
from rag_service.db.database import Database
from rag_service.db.model_switch import check_vectors_writable
from rag_service.ingest.graph import GraphBuilder

#: a run into an empty collection goes the bulk way from this many documents (chosen, not measured:
#: below it the row path's per-batch commits cost little and keep partial progress of a failed run)
BULK_MIN_DOCUMENTS = 1000


class BulkWriter:
    """One bulk load's transaction; a context manager that rolls back whatever ``commit`` did not commit."""

    def __init__(
        self,
        db: Database,
        *,
        collection: str,
        fts_config: str,
        keywords: repo.ChunkKeywords,
        graph: GraphBuilder,
        model_id: str,
        replace: bool = False,
    ) -> None:
        self.db = db
        self.replace = replace  # the run rewrites stored documents (``rag reindex --all``): ``db.bulk_replace``
        self.collection = collection
        self.fts_config = fts_config
        self.keywords = keywords
        self.graph = graph
        self.model_id = model_id
        self.timings: dict[str, float] = {}
        self._stack = ExitStack()
        self._load: BulkLoad | None = None
        self._texts: dict[int, tuple[str, str]] = {}  # document id -> (source, text), for the graph

    def __enter__(self) -> BulkWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.__exit__(exc_type or RuntimeError, exc or RuntimeError("bulk load not committed"), tb)

    def _session(self) -> BulkLoad:
        if self._load is None:
            with ExitStack() as setup:  # a refusal below rolls the transaction back at once
                session = setup.enter_context(self.db.transaction())
                repo.commit_synchronously(session)
                check_vectors_writable(session, model_id=self.model_id)
                load = BulkLoad(
                    session,
                    collection=self.collection,
                    fts_config=self.fts_config,
                    keywords=self.keywords,
                    replace=self.replace,
                )
                load.start()
                self._stack = setup.pop_all()
            self._load = load
        return self._load

    def add(self, documents: Sequence[StagedDocument]) -> None:
        """Stage a batch's documents (a savepoint: a failure leaves the rest of the load as it was)."""
        load = self._session()
        with load.session.begin_nested():
            ids = load.add_documents(documents)
        self._texts.update((i, (d.source, d.content)) for i, d in zip(ids, documents, strict=True))

    def write(self, phase: Callable[[str], None]) -> tuple[int, float]:
        """Write everything staged (``db.bulk.BulkLoad.finish``, then the graph), uncommitted; returns
        (edges written, seconds of graph). ``phase`` hears each step."""
        if self._load is None:
            return 0, 0.0
        load = self._load
        self.timings = load.finish(phase)
        return self._graph(load.session, load.document_ids, phase)

    def commit(self) -> None:
        """Commit the load (synchronously: ``commit_synchronously`` when it began)."""
        self._stack.close()

    def _graph(self, session: Session, document_ids: list[int], phase: Callable[[str], None]) -> tuple[int, float]:
        """Each document's edges in write order, similarity edges among the documents written up to it
        (what the row path could see when it wrote the document)."""
        phase("graph edges")
        started = time.perf_counter()
        edges = 0
        for document_id in document_ids:
            source, text = self._texts[document_id]
            edges += self.graph.build(
                session,
                collection=self.collection,
                document_id=document_id,
                source=source,
                text=text,
                up_to_document=document_id,
            )
        seconds = time.perf_counter() - started
        self.timings["graph"] = seconds
        return edges, seconds
