"""``rag metadata build``: keywords and summaries for documents already stored, without re-embedding.

Each document's summary is made again from its stored text (a stored LLM summary the LLM fails to renew is
kept: ``SummaryWriter``) and each chunk's keywords are recomputed
against the collection's current BM25 statistics (so a collection's first documents get the keywords
the whole collection would give them). Vectors, tsvectors and postings are not touched. Documents are
written in transactions of ``BATCH_DOCUMENTS``, under the collection's reindex lock. Each text is read in a
short transaction of its own and summarised outside any (an LLM may take ``RAG_LLM_TIMEOUT_S`` per document:
no snapshot or row is held meanwhile); a summary is written only if its document's text is still the one read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rag_service.config import Settings
from rag_service.db import metadata as repo
from rag_service.db.database import Database
from rag_service.db.keywords import backfill_keywords
from rag_service.db.locks import reindex_lock
from rag_service.ingest.metadata_policy import GENERATED_METADATA_KEYS
from rag_service.ingest.summary import SummaryWriter

#: documents per transaction
BATCH_DOCUMENTS = 100


@dataclass(slots=True)
class BackfillReport:
    """What ``rag metadata build`` did."""

    collections: list[str] = field(default_factory=list)
    documents: int = 0
    chunks: int = 0
    summaries: int = 0
    seconds: float = 0.0
    degraded: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Human-readable summary."""
        names = ", ".join(map(repr, self.collections)) or "(none)"  # quoted: a name's ESC or newline shown
        return [
            f"collections: {names}",
            f"documents:   {self.documents} ({self.summaries} with a summary)",
            f"chunks:      {self.chunks} keyword lists recomputed",
            f"time:        {self.seconds:.1f} s",
            *(f"degraded:    {line}" for line in self.degraded),
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "collections": list(self.collections),
            "documents": self.documents,
            "chunks": self.chunks,
            "summaries": self.summaries,
            "seconds": round(self.seconds, 3),
            "degraded": list(self.degraded),
        }


def build_metadata(
    db: Database, settings: Settings, summaries: SummaryWriter, *, collection: str | None = None
) -> BackfillReport:
    """Recompute summaries and keywords of every document of ``collection`` (or of all collections)."""
    started = time.perf_counter()
    report = BackfillReport()
    with db.transaction() as session:
        report.collections = repo.collections_with_documents(session, collection)
    for name in report.collections:
        with reindex_lock(db.engine, name):
            with db.transaction() as session:
                refs = repo.document_refs(session, name)
            for start in range(0, len(refs), BATCH_DOCUMENTS):
                batch = refs[start : start + BATCH_DOCUMENTS]
                made = [
                    (doc, summaries.metadata(doc.text, stored=doc.metadata, again=True))
                    for doc in _texts(db, name, batch)
                ]
                with db.transaction() as session:
                    for doc, generated in made:
                        if repo.set_generated_metadata(
                            session,
                            name,
                            doc.id,
                            generated,
                            keys=GENERATED_METADATA_KEYS,
                            content_hash=doc.content_hash,
                        ):
                            report.summaries += 1 if generated.get("summary") else 0
                    ids = repo.chunk_ids(session, [ref.id for ref in batch])
                    backfill_keywords(
                        session,
                        ids,
                        collection=name,
                        fts_config=settings.fts_config,
                        keyword_count=settings.chunk_keywords,
                        bm25_k1=settings.bm25_k1,
                        bm25_b=settings.bm25_b,
                    )
                report.documents += len(batch)
                report.chunks += len(ids)
    report.degraded = summaries.degraded()
    report.seconds = time.perf_counter() - started
    return report


def _texts(db: Database, collection: str, refs: list[repo.DocumentRef]) -> Iterator[repo.DocumentText]:
    """The stored texts of ``refs`` (those still there), each read in a transaction closed before it is yielded."""
    for ref in refs:
        with db.transaction() as session:
            found = repo.document_text(session, collection, ref.id)
        if found is not None:
            yield found
