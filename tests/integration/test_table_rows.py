"""``RAG_TABLE_ROWS`` with the real bundled model: a configuration table's row answers its question."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_service.service import UniversalRAGService

pytestmark = pytest.mark.slow

ROWS = [
    ("RAG_DATABASE_URL", "any PostgreSQL server with pgvector, as a SQLAlchemy URL", "embedded PostgreSQL"),
    ("RAG_DATA_DIR", "where the embedded database and the model caches live", "`.rag_data`"),
    ("RAG_EMBEDDING_MODEL", "sentence-transformers name or local path", "all-MiniLM-L6-v2"),
    ("RAG_RERANK_MODEL", "cross-encoder name or local path; `none` turns reranking off", "ms-marco-MiniLM-L-6-v2"),
    ("RAG_FTS_CONFIG", "Postgres text-search configuration", "`english`"),
    ("RAG_CHUNK_SIZE", "characters per child chunk", "`500`"),
    ("RAG_BM25_K1", "BM25 term-frequency saturation", "`1.2`"),
    ("RAG_LLM_RERANK", "with an LLM, it rescores the top candidates of each query", "`false`"),
    ("RAG_LLM_MODEL", "the model name sent to the LLM endpoint", "unset"),
    ("RAG_POOL_SIZE", "connection pool bounds", "`5`"),
]
README = (
    "# Service\n\n## Configuration\n\nEvery setting is an environment variable.\n\n"
    "| variable | meaning | default |\n|---|---|---|\n"
    + "".join(f"| `{name}` | {meaning} | {default} |\n" for name, meaning, default in ROWS)
)
QUESTION = "Which environment variable selects the reranking model?"


@pytest.mark.parametrize("table_rows", [False, True])
def test_a_configuration_question_finds_its_row(db, settings, default_minilm, table_rows):
    svc = UniversalRAGService(replace(settings, table_rows=table_rows), database=db, embedder=default_minilm)
    assert svc.index_texts([("README.md", "Service", README)], collection="conf", strategy="markdown").added == 1
    first = svc.retrieve(QUESTION, "workflow", collection="conf", return_parents=False, rerank_enabled=False).chunks[0]
    assert "RAG_RERANK_MODEL" in first.content
    # the row alone, under its header row, instead of a window of rows
    assert (first.content == "| `RAG_RERANK_MODEL` | " + " | ".join(ROWS[3][1:]) + " |") is table_rows
