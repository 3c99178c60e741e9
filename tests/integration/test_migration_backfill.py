"""Migrating a database that already holds chunks to the BM25 revision computes exact statistics."""

from __future__ import annotations

from sqlalchemy import text

from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import assert_stats_consistent


def test_upgrade_from_0001_with_data(database_factory, settings, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    (tmp_path / "n.txt").write_text("Replicas replay the write-ahead log; backups archive it nightly. " * 4)
    engine = make_engine(database_factory.create("rag_backfill"), settings)
    try:
        migrate.upgrade(engine, "0001")
        with engine.begin() as conn:  # what 0001-era code wrote: chunks without statistics
            conn.execute(
                text(
                    "INSERT INTO documents (collection, source, content, content_hash, chunker) "
                    "VALUES ('c', 'n.txt', 'x', 'h', 'recursive:500:100:50:v1')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO document_chunks (document_id, collection, chunk_index, chunk_type, content, "
                    "start_char, end_char, token_count, content_hash, embedding, content_tsv) "
                    "SELECT d.id, 'c', g, 'text', 'replica log backup ' || g, 0, 1, 3, 'h' || g, "
                    "array_fill(0.1, ARRAY[384])::vector, "
                    "to_tsvector('english', 'replica log backup log ' || g) FROM documents d, generate_series(1, 5) g"
                )
            )
        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT min(lexeme_count) FROM document_chunks")).scalar() == 5
            assert_stats_consistent(conn)
        Indexer(Database(engine), HashingEmbedder(), settings).index_paths([tmp_path / "n.txt"], collection="c")
        with engine.connect() as conn:
            assert_stats_consistent(conn)
        migrate.downgrade(engine, "0001")
        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert_stats_consistent(conn)
    finally:
        engine.dispose()
