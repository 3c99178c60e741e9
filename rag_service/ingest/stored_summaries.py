"""What one ingest run knows of its collection's stored summaries (``SummaryWriter`` decides with it).

A re-chunk of unchanged text (``--force``, a chunking setting, ``reindex --all``) gets the stored generated keys,
so a stored LLM summary is kept without a call. A document met unchanged whose summary is marked
``summary_retry`` (the LLM failed when it was written) has its summary asked again, and only its generated keys
written, in a short transaction of their own: no re-chunking, no embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from rag_service.db import metadata as repo
from rag_service.db.database import Database
from rag_service.db.documents import StoredDocument, commit_synchronously
from rag_service.db.locks import RunLock
from rag_service.ingest.metadata_policy import GENERATED_METADATA_KEYS
from rag_service.ingest.summary import RETRY, SummaryWriter
from rag_service.shutdown import deferred_stop


class StoredSummaries:
    """One run's view of the stored summaries of ``collection``; ``lock`` is checked before each write."""

    def __init__(self, db: Database, collection: str, summaries: SummaryWriter, lock: RunLock | None = None) -> None:
        self.db = db
        self.collection = collection
        self.summaries = summaries
        self.lock = lock
        self._looked_up: set[int] = set()  # documents whose mark is known (``look_up``)
        self._marked: set[int] = set()

    def look_up(self, session: Session, documents: Sequence[StoredDocument]) -> None:
        """Note which of ``documents`` are marked for the LLM, in one query (none when the run asks no LLM)."""
        if self.summaries.asks_llm:
            ids = [doc.id for doc in documents]
            self._marked |= repo.holding_key(session, self.collection, ids, RETRY)
            self._looked_up.update(ids)

    def of(self, existing: StoredDocument | None, digest: str) -> dict[str, Any] | None:
        """The metadata stored for a document whose text hashes to ``digest``, or None when it is new or changed."""
        if existing is None or existing.content_hash != digest:
            return None
        with self.db.transaction() as session:
            return repo.stored_metadata(session, self.collection, existing.id)

    def retry(self, existing: StoredDocument, text: str) -> None:
        """Ask the LLM again for the summary of an unchanged document if it is marked, and write it if it came."""
        if not self.summaries.asks_llm:
            return
        if existing.id in self._looked_up:
            marked = existing.id in self._marked
        else:
            with self.db.transaction() as session:
                marked = bool(repo.holding_key(session, self.collection, [existing.id], RETRY))
        if not marked:
            return
        generated = self.summaries.metadata(text, stored={RETRY: True})
        if generated.get(RETRY):  # failed again: the stored summary, marked, stays
            return
        with deferred_stop(), self.db.transaction() as session:
            commit_synchronously(session)
            repo.set_generated_metadata(
                session,
                self.collection,
                existing.id,
                generated,
                keys=GENERATED_METADATA_KEYS,
                content_hash=existing.content_hash,
            )
            if self.lock is not None:
                self.lock.check(session)
