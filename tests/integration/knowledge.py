"""A small markdown knowledge base shared by the integration adapters' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service.config import Settings
from rag_service.db.database import Database
from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService

DOCS = {
    "ops.md": """# Operations

## Backups

Nightly backups run with pg_dump at two in the morning. Each backup is kept for thirty days and a
weekly copy is shipped to cold storage so a restore can go back up to a year.

## Replication

A streaming replica follows the primary with a few milliseconds of lag. Failover promotes the replica
and points the service at it through the connection string in RAG_DATABASE_URL.
""",
    "search.md": """# Search

## Hybrid search

The vector arm finds chunks by meaning through the HNSW index, the keyword arm finds exact terms through
the GIN index on the stored tsvector, and reciprocal rank fusion merges both rankings into one list.

## Reranking

A cross-encoder reads the query and each candidate together and scores how well they match. It is slower
than the vector arm, so it only sees the fused candidates, never the whole corpus.
""",
}


def write_docs(folder: Path) -> Path:
    """Write ``DOCS`` into ``folder`` (created) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in DOCS.items():
        (folder / name).write_text(body)
    return folder


def kb_service(
    db: Database, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> UniversalRAGService:
    """A service (hashing embedder, no reranker) with ``DOCS`` indexed into collection ``kb``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    svc = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    report = svc.index_paths([write_docs(tmp_path / "kb")], collection="kb")
    assert report.failed == [] and report.added == 2
    return svc
