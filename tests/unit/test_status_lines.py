"""``rag db status``'s lines for each collection: counts in words a reader expects."""

from __future__ import annotations

from rag_service.db.status import DatabaseStatus


def test_a_collection_of_one_document_says_so_in_the_singular():
    status = DatabaseStatus(
        url="postgresql+psycopg://u@/rag",
        server_version="18.6",
        pgvector_version="0.8.6",
        revision="0015",
        head="0015",
        embedding_model="m",
        embedding_dim=384,
        fts_config="english",
        collections={"kb": (2, 208), "web": (1, 1)},
        packed=frozenset({"kb"}),
    )
    lines = status.lines()
    assert "collection: kb: 2 documents, 208 chunks, postings packed (exact BM25)" in lines
    assert "collection: web: 1 document, 1 chunk" in lines
