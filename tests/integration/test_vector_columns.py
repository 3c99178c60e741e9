"""A database without vectors takes the dimension of the model that writes first (``db.vector_columns``).

The migrations create 384-d columns (the bundled MiniLM's); a 768-d model (``RAG_EMBEDDING_MODEL``) used to be
refused by every database, a new one included, with advice to use a new database. Each path that writes first (the
row path, the bulk first index, a schema partitioned by collection) is checked: the columns' type, the HNSW index,
the contexts' mean vectors, a search, and the refusal of a model of the old size afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from rag_service.db.database import Database
from rag_service.db.index_settings import read_index_settings
from rag_service.embed import HashingEmbedder
from rag_service.errors import EmbeddingMismatchError
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.integration.test_bulk_index import _fresh, write_corpus

_COLUMN_TYPES = text(
    "SELECT attrelid::regclass::text, format_type(atttypid, atttypmod) FROM pg_attribute "
    "WHERE attname = 'embedding' AND attrelid IN ('document_chunks'::regclass, 'document_contexts'::regclass) "
    "ORDER BY 1"
)
_HNSW = text("SELECT count(*) FROM pg_indexes WHERE tablename = 'document_chunks' AND indexdef LIKE '%USING hnsw%'")


@pytest.mark.parametrize(("bulk", "partitioned"), [(False, False), (True, False), (True, True)])
def test_a_new_database_takes_the_dimension_of_its_first_model(
    database_factory: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bulk: bool, partitioned: bool
) -> None:
    docs = write_corpus(tmp_path, monkeypatch)
    engine = _fresh(database_factory, settings, partitioned=partitioned)
    wide = HashingEmbedder(dim=768, model_id="test/wide")
    try:
        indexer = Indexer(Database(engine), wide, settings)
        indexer.bulk_min_documents = 0 if bulk else 10**9
        report = indexer.index_paths([docs], collection="kb")
        assert report.failed == [] and report.added == 8
        with engine.connect() as conn:
            assert conn.execute(_COLUMN_TYPES).all() == [
                ("document_chunks", "vector(768)"),
                ("document_contexts", "vector(768)"),
            ]
            assert conn.execute(_HNSW).scalar() >= 1
            assert conn.execute(text("SELECT count(embedding) FROM document_contexts")).scalar() > 0
        service = UniversalRAGService(settings, database=Database(engine), embedder=wide, reranker=None)
        result = service.retrieve("restore a backup of the database", "search", collection="kb")
        assert result.chunks and "backup" in result.chunks[0].source
        narrow = HashingEmbedder(dim=384, model_id="test/narrow")
        with pytest.raises(EmbeddingMismatchError, match="makes 384-d vectors but this database stores 768-d vectors"):
            UniversalRAGService(settings, database=Database(engine), embedder=narrow, reranker=None)
        with pytest.raises(EmbeddingMismatchError, match="makes 384-d vectors but this database stores 768-d"):
            Indexer(Database(engine), narrow, settings).index_texts([("n.txt", "N", "notes")], collection="other")
    finally:
        engine.dispose()


def test_a_database_holding_vectors_keeps_its_dimension(db: Database, settings: Any) -> None:
    Indexer(db, HashingEmbedder(), settings).index_texts([("a.txt", "A", "backups and restores")], collection="kb")
    with pytest.raises(EmbeddingMismatchError, match="makes 768-d vectors but this database stores 384-d"):
        Indexer(db, HashingEmbedder(dim=768, model_id="test/wide"), settings).index_texts(
            [("b.txt", "B", "more notes")], collection="other"
        )


def test_a_model_over_hnsws_limit_is_one_line_and_changes_nothing(db: Database, settings: Any) -> None:
    huge = HashingEmbedder(dim=2001, model_id="test/huge")
    with pytest.raises(EmbeddingMismatchError) as refused:
        Indexer(db, huge, settings).index_texts([("a.txt", "A", "backups")], collection="kb")
    assert str(refused.value) == (
        "embedding model 'test/huge' makes 2001-d vectors; pgvector's HNSW index takes at most 2,000; "
        "choose a model of at most 2,000 dimensions"
    )
    with db.transaction() as session:
        assert session.execute(_COLUMN_TYPES).all()[0] == ("document_chunks", "vector(384)")
        assert read_index_settings(session) is None


def test_reindex_all_of_a_new_database_with_a_wider_model_is_not_refused(db: Database, settings: Any) -> None:
    report = Indexer(db, HashingEmbedder(dim=768, model_id="test/wide"), settings).reindex_all(switch_model=True)
    assert report.ok and report.failed == []


_OPENED_FIRST = """
import sys
from rag_service.config import Settings
from rag_service.db.engine import make_engine
from sqlalchemy import text
engine = make_engine(sys.argv[1], Settings())
with engine.connect() as conn:  # a pooled connection opened before anything wrote a vector
    conn.execute(text("SELECT 1"))
from rag_service.db.vector_type import PackedVector  # the writing modules come later (a lazy import)
with engine.connect() as conn:
    print(conn.execute(text("SELECT vector_dims(CAST(:v AS vector))"), {"v": PackedVector([0.5] * 3)}).scalar())
"""


def test_a_connection_opened_before_the_vector_modules_were_imported_sends_vectors(engine, migrated_url):
    """psycopg copies its adapters into a connection as it opens: one opened before the vector dumper was
    registered failed every write ("cannot adapt type 'PackedVector'"; a test file run alone)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _OPENED_FIRST, migrated_url], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr[-2000:]
