"""``service.index_texts`` stores metadata like ``index_paths`` does."""

from __future__ import annotations

from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.ingest.metadata_policy import user_metadata
from rag_service.service import UniversalRAGService


def test_index_texts_stores_metadata(db, settings, connection):
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    item = ("notes/a", "A", "Logical replication slots keep WAL until every subscriber has confirmed it. " * 2)
    report = service.index_texts([item], collection="m", metadata={"team": "storage"})
    assert report.added == 1
    stored = connection.execute(text("SELECT metadata FROM documents WHERE collection = 'm'")).scalar_one()
    assert user_metadata(stored) == {"team": "storage"}
    assert stored["summary_source"] == "extractive", "ingestion adds its summary beside the caller's keys"
