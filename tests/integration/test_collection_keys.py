"""Migration 0005 on a database holding data: every row and every BM25 statistic survives, the keys
start with ``collection``, writes keep the statistics exact, and the downgrade restores 0004's keys."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection, Engine, text

from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer
from tests.integration.test_bm25 import assert_stats_consistent

TABLES = {
    "documents": "SELECT id, collection, source, content_hash, chunk_count FROM documents ORDER BY id",
    "document_chunks": "SELECT id, collection, document_id, chunk_index, content, content_hash, "
    "embedding::text, content_tsv::text, lexeme_count FROM document_chunks ORDER BY id",
    "chunk_terms": "SELECT chunk_id, collection, lexeme, tf, doc_len FROM chunk_terms ORDER BY 1, 3",
    "lexeme_stats": "SELECT collection, lexeme, doc_freq FROM lexeme_stats ORDER BY 1, 2",
    "collection_stats": "SELECT collection, chunk_count, total_length FROM collection_stats ORDER BY 1",
}

TEXTS = [
    ("wal.md", "Replicas", "Replicas replay the write-ahead log. Backups archive it nightly to object storage."),
    ("hnsw.md", "Indexes", "An HNSW graph finds near vectors; ef_search trades recall against speed per query."),
    ("bm25.md", "Keywords", "BM25 weighs rare terms up and long chunks down; postings live in chunk_terms."),
]


def snapshot(conn: Connection) -> dict[str, list[Any]]:
    return {name: [tuple(r) for r in conn.execute(text(sql))] for name, sql in TABLES.items()}


def keys(conn: Connection) -> dict[str, list[str]]:
    """Primary, unique and foreign keys of the keyed tables: constraint name -> its columns in order."""
    rows = conn.execute(
        text(
            "SELECT c.conname, array_agg(a.attname ORDER BY k.ord) FROM pg_constraint c "
            "CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum "
            "WHERE c.conrelid::regclass::text = ANY(:t) AND c.contype IN ('p', 'u', 'f') GROUP BY c.conname"
        ),
        {"t": list(TABLES)},
    )
    return {name: list(cols) for name, cols in rows}


def _index(engine: Engine, settings: Any, collection: str, texts: list[tuple[str, str, str]]) -> None:
    Indexer(Database(engine), HashingEmbedder(), settings).index_texts(texts, collection=collection)


def _index_at_0004(engine: Engine, collection: str, texts: list[tuple[str, str, str]]) -> None:
    """Rows as the code of revision 0004 wrote them, in SQL: today's indexer also writes the tables of
    later migrations (the chunk graph, keywords), which a database at 0004 does not have."""
    embedder = HashingEmbedder()
    with engine.begin() as conn:
        for source, title, body in texts:
            pieces = [p for p in re.split(r"(?<=\.) ", body) if p.strip()]
            document_id = conn.execute(
                text(
                    "INSERT INTO documents (collection, source, title, content, content_hash, chunker, chunk_count) "
                    "VALUES (:c, :s, :t, :b, md5(:b), 'test:v1', :n) RETURNING id"
                ),
                {"c": collection, "s": source, "t": title, "b": body, "n": len(pieces)},
            ).scalar_one()
            for index, piece in enumerate(pieces):
                start = body.index(piece)
                vector = "[" + ",".join(str(float(x)) for x in embedder.embed_query(piece)) + "]"
                conn.execute(
                    text(
                        "INSERT INTO document_chunks (document_id, collection, chunk_index, chunk_type, content, "
                        "start_char, end_char, token_count, content_hash, embedding, content_tsv) VALUES "
                        "(:d, :c, :i, 'child', :p, :s, :e, 1, md5(:p), CAST(:v AS vector), to_tsvector('english', :p))"
                    ),
                    {"d": document_id, "c": collection, "i": index, "p": piece, "s": start, "e": start + len(piece)}
                    | {"v": vector},
                )


def test_upgrade_keeps_rows_and_statistics_and_keys_start_with_collection(database_factory, settings):
    engine = make_engine(database_factory.create("rag_keys"), settings)
    try:
        migrate.upgrade(engine, "0004")
        _index_at_0004(engine, "alpha", TEXTS)
        _index_at_0004(engine, "beta", [(s, t, body + " Second tenant.") for s, t, body in TEXTS[:2]])
        with engine.connect() as conn:
            before = snapshot(conn)
        assert len(before["document_chunks"]) >= 5 and len(before["chunk_terms"]) > 50

        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert snapshot(conn) == before
            assert_stats_consistent(conn)
            found = keys(conn)
            covering = conn.execute(text("SELECT pg_get_indexdef('pk_chunk_terms'::regclass)")).scalar_one()
        assert covering.endswith("(collection, chunk_id, lexeme) INCLUDE (tf, doc_len)")
        assert found == {
            "documents_pkey": ["collection", "id"],
            "uq_documents_collection_source": ["collection", "source"],
            "document_chunks_pkey": ["collection", "id"],
            "uq_document_chunks_document_index": ["collection", "document_id", "chunk_index"],
            "fk_document_chunks_document": ["collection", "document_id"],
            "pk_chunk_terms": ["collection", "chunk_id", "lexeme"],
            "pk_lexeme_stats": ["collection", "lexeme"],
            "collection_stats_pkey": ["collection"],
        }

        # writes after the upgrade: insert, update (re-chunk), cascade delete, all exact
        _index(engine, settings, "beta", [("new.md", "New", "Citus shards by collection; one shard per tenant.")])
        _index(engine, settings, "alpha", [(TEXTS[0][0], TEXTS[0][1], "Replicas now stream the log over TCP.")])
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM documents WHERE collection = 'alpha' AND source = 'hnsw.md'"))
        with engine.connect() as conn:
            assert_stats_consistent(conn)
            after = snapshot(conn)

        migrate.downgrade(engine, "0004")
        with engine.connect() as conn:
            assert snapshot(conn) == after
            assert_stats_consistent(conn)
            assert keys(conn)["pk_chunk_terms"] == ["chunk_id", "lexeme"]
            assert keys(conn)["documents_pkey"] == ["id"]
        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert snapshot(conn) == after
    finally:
        engine.dispose()


def test_upgrade_refuses_chunks_in_another_collection_than_their_document(database_factory, settings):
    engine = make_engine(database_factory.create("rag_keys_bad"), settings)
    try:
        migrate.upgrade(engine, "0004")
        _index_at_0004(engine, "alpha", TEXTS[:1])
        with engine.begin() as conn:
            conn.execute(text("UPDATE document_chunks SET collection = 'other'"))
        try:
            migrate.upgrade(engine)
        except RuntimeError as exc:
            assert "another collection than their document" in str(exc)
            assert "\n" not in str(exc)
        else:
            raise AssertionError("the upgrade should have refused")
        with engine.connect() as conn:
            assert migrate.current_revision(conn) == "0004"
    finally:
        engine.dispose()


def test_every_write_path_statement_names_its_collection(db, engine, settings, tmp_path, monkeypatch):
    """Ingest, update, rename, prune and reindex --all send no statement on the keyed tables without
    ``collection =`` (or, for an INSERT, the collection's value): on Citus each is a single-shard query.
    Two statements are meant to span them: listing the stored collections (for reindex --all), and asking the
    other collections for the vectors of texts this one lacks (``documents.stored_embeddings``)."""
    from sqlalchemy import event

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    folder = tmp_path / "kb"
    folder.mkdir()
    for source, title, body in TEXTS:
        (folder / source).write_text(f"# {title}\n\n{body}\n")
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        sent.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", record)
    try:
        indexer = Indexer(db, HashingEmbedder(), settings)
        indexer.index_paths([folder], collection="alpha")
        (folder / "wal.md").write_text("# Replicas\n\nReplicas stream the log now, over TCP.\n")
        (folder / "hnsw.md").unlink()
        indexer.index_paths([folder], collection="alpha", prune=True)
        indexer.reindex_all()
        indexer.reindex_all(collection="alpha")
    finally:
        event.remove(engine, "before_cursor_execute", record)
    keyed = re.compile(r"\b(documents|document_chunks|chunk_terms|lexeme_stats|collection_stats)\b")
    named = re.compile(r"\bcollection\b\s*(=|IN\b)|^INSERT INTO \w+ \([^)]*\bcollection\b", re.IGNORECASE)
    spanning = (
        "SELECT DISTINCT documents.collection FROM documents ORDER BY documents.collection",
        "SELECT held.content_hash, vector_send(held.embedding) AS embedding FROM collection_stats JOIN LATERAL",
    )
    catalog = re.compile(r"\bpg_\w+|to_reg\w+\(")  # the schema's own look-ups (dimension, partitions)
    maintenance = "ANALYZE "  # planner statistics are per table (db/statistics.py); Citus runs it on every shard
    touched = [
        s for s in sent if keyed.search(s) and not catalog.search(s) and not s.startswith((*spanning, maintenance))
    ]
    assert len(touched) > 10
    assert any(s.startswith(spanning[1]) for s in sent), "the look-up of other collections' vectors ran"
    assert [s[:160] for s in touched if not named.search(s)] == []
