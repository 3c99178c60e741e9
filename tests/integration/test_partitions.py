"""``rag db upgrade --partition-by-collection``: LIST partitions per collection, created with its first
data; the BM25 statistics stay exact (a full recount) through insert, update and cascade delete."""

from __future__ import annotations

import dataclasses
import io
import os
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text

from rag_service.db import migrate, partitions
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.partitions import is_partitioned, partition_by_collection
from rag_service.db.status import read_status
from rag_service.embed import HashingEmbedder
from rag_service.errors import SchemaError
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.integration.test_bm25 import assert_stats_consistent
from tests.integration.test_citus import HNSW_BUILD_OPTIONS, TEXTS, _stats, _write_everything
from tests.integration.test_cli import rag
from tests.integration.test_vector_storage import LONG_SECTION, vector_layout


@pytest.fixture
def partitioned(database_factory, settings):
    engine = make_engine(database_factory.create("rag_parts"), settings)
    migrate.upgrade(engine, partition_by_collection=True)
    yield engine
    engine.dispose()


def _partitions(conn) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """Partition bounds per partitioned table."""
    rows = conn.execute(
        text(
            "SELECT p.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE p.relname IN ('documents', 'document_chunks', 'chunk_terms') ORDER BY 1, 2"
        )
    ).all()
    found: dict[str, list[str]] = {}
    for parent, bound in rows:
        found.setdefault(parent, []).append(bound)
    return found


def test_a_collection_gets_its_partitions_with_its_first_data_and_stats_stay_exact(
    partitioned, settings, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    with partitioned.connect() as conn:
        assert is_partitioned(conn) and _partitions(conn) == {}
        config = migrate.alembic_config(conn)
        config.stdout = io.StringIO()
        command.check(config)  # the partitioned tables still match the models
    indexer = Indexer(Database(partitioned), HashingEmbedder(), settings)
    folder = tmp_path / "ops"
    for name, body in TEXTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body * 3)

    assert indexer.index_paths([folder], collection="alpha").added == 4  # insert
    assert indexer.index_paths([folder], collection="it's β").added == 4  # any name is a partition
    with partitioned.connect() as conn:
        bounds = ["FOR VALUES IN ('alpha')", "FOR VALUES IN ('it''s β')"]
        assert _partitions(conn) == {t: bounds for t in ("chunk_terms", "document_chunks", "documents")}
        hnsw = conn.execute(
            text("SELECT count(*) FROM pg_indexes WHERE tablename LIKE 'document_chunks_%' AND indexdef LIKE '%hnsw%'")
        ).scalar()
        assert hnsw == 2  # one HNSW graph per collection
        assert_stats_consistent(conn)
    assert "layout:     one node, partitioned by collection (2 collections)" in read_status(partitioned).lines()
    sizes = {name: size for kind, name, size in read_status(partitioned).sizes}  # summed over the partitions
    assert sizes["ix_document_chunks_embedding_hnsw"] > 0 and sizes["document_chunks"] > 0

    (tmp_path / "ops/wal.md").write_text(TEXTS["ops/wal.md"] + "Streaming replicas follow the primary.\n")
    assert indexer.index_paths([folder], collection="alpha").updated == 1  # update: chunks replaced
    with partitioned.begin() as conn:
        conn.execute(text("UPDATE document_chunks SET content_tsv = to_tsvector('english', content || ' more')"))
    with partitioned.connect() as conn:
        assert_stats_consistent(conn)

    with partitioned.begin() as conn:  # cascade delete: one document, then a whole collection
        conn.execute(text("DELETE FROM documents WHERE collection = 'alpha' AND source = 'ops/bm25.md'"))
    with partitioned.connect() as conn:
        assert_stats_consistent(conn)
    with partitioned.begin() as conn:
        conn.execute(text("DELETE FROM documents WHERE collection = 'it''s β'"))
    with partitioned.connect() as conn:
        assert_stats_consistent(conn)
        assert [c for (c,) in conn.execute(text("SELECT collection FROM collection_stats"))] == ["alpha"]

    service = UniversalRAGService(settings, database=Database(partitioned), embedder=HashingEmbedder(), reranker=None)
    result = service.retrieve("how do replicas replay the write-ahead log?", context="search", collection="alpha")
    assert result.chunks and result.chunks[0].source == "ops/wal.md"


def test_an_emptied_collection_drops_its_partitions_and_no_other(partitioned, settings, tmp_path):
    """docs/scale-out.md: dropping a collection drops its partitions (its last document deleted or pruned)."""
    for name, body in TEXTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body * 3)
    service = UniversalRAGService(settings, database=Database(partitioned), embedder=HashingEmbedder(), reranker=None)
    assert service.index_paths([tmp_path / "ops"], collection="alpha", root=tmp_path).added == 4
    assert service.index_paths([tmp_path / "ops/wal.md"], collection="tenant b", root=tmp_path).added == 1
    assert service.index_paths([tmp_path / "ops/citus.md"], collection="c", root=tmp_path).added == 1
    bounds = ["FOR VALUES IN ('alpha')", "FOR VALUES IN ('c')", "FOR VALUES IN ('tenant b')"]
    with partitioned.connect() as conn:
        assert _partitions(conn) == {t: bounds for t in ("chunk_terms", "document_chunks", "documents")}

    assert service.delete_document("ops/wal.md", collection="tenant b") == 1  # its only document
    (tmp_path / "ops/citus.md").unlink()  # a prune that removes the collection's last document
    report = service.index_paths([tmp_path / "ops/citus.md"], collection="c", root=tmp_path, prune=True)
    assert report.deleted == 1
    with partitioned.connect() as conn:
        left = ["FOR VALUES IN ('alpha')"]
        assert _partitions(conn) == {t: left for t in ("chunk_terms", "document_chunks", "documents")}
        assert_stats_consistent(conn)
    assert service.delete_document("ops/bm25.md", collection="alpha") == 1  # not emptied: kept
    with partitioned.connect() as conn:
        assert _partitions(conn)["documents"] == ["FOR VALUES IN ('alpha')"]
    assert service.index_texts([("back", "", "# Back\n\nA tenant returns.\n")], collection="tenant b").added == 1
    assert [c.source for c in service.retrieve("tenant returns", context="search", collection="tenant b").chunks] == [
        "back"
    ]


def test_an_emptied_collection_keeps_its_partitions_while_the_tables_are_busy(
    partitioned, settings, monkeypatch, caplog
):
    """A query holding the parents keeps the drop from waiting on: the delete is done, the partitions stay."""
    monkeypatch.setattr(partitions, "DROP_LOCK_WAIT", "200ms")
    service = UniversalRAGService(settings, database=Database(partitioned), embedder=HashingEmbedder(), reranker=None)
    service.index_texts([("a", "", "# A\n\nOne section.\n")], collection="a")
    service.index_texts([("b", "", "# B\n\nAnother section.\n")], collection="b")
    with partitioned.connect() as reader:
        reader.execute(text("SELECT count(*) FROM documents WHERE collection = 'b'"))  # holds the parent shared
        assert service.delete_document("a", collection="a") == 1
        reader.rollback()
    assert "partitions stay (the tables were busy)" in caplog.text
    with partitioned.connect() as conn:
        assert len(_partitions(conn)["documents"]) == 2
    assert [c.name for c in service.collections()] == ["b"]
    service.index_texts([("a2", "", "# A\n\nBack again.\n")], collection="a")  # the partitions are still usable
    service.delete_document("a2", collection="a")
    with partitioned.connect() as conn:
        assert _partitions(conn)["documents"] == ["FOR VALUES IN ('b')"]


def test_a_collections_partition_keeps_the_vectors_in_the_row(partitioned, settings, tmp_path):
    (tmp_path / "restores.md").write_text(f"# Operations\n\n{LONG_SECTION}\n")
    indexer = Indexer(Database(partitioned), HashingEmbedder(), settings)
    assert indexer.index_paths([tmp_path], collection="ops").added == 1
    with partitioned.connect() as conn:
        large, out_of_line = vector_layout(conn)
    assert large > 0 and out_of_line == 0


def test_partitioned_and_plain_tables_keep_the_same_statistics(
    partitioned, database_factory, settings, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    plain = make_engine(database_factory.create("rag_plain"), settings)
    try:
        migrate.upgrade(plain)
        found = {}
        for name, engine in (("plain", plain), ("partitioned", partitioned)):
            _write_everything(Database(engine), settings, tmp_path / name)
            with engine.connect() as conn:
                assert_stats_consistent(conn)
                found[name] = _stats(conn)
        assert found["partitioned"] == found["plain"]
    finally:
        plain.dispose()


def test_partitioning_refuses_tables_with_data_and_is_idempotent(partitioned, database_factory, settings):
    with partitioned.begin() as conn:
        assert partition_by_collection(conn) is False  # already partitioned: nothing to do
    engine = make_engine(database_factory.create("rag_parts_full"), settings)
    try:
        migrate.upgrade(engine)
        Indexer(Database(engine), HashingEmbedder(), settings).index_texts(
            [("a.md", "A", "Replicas replay the write-ahead log nightly. " * 3)], collection="c"
        )
        with pytest.raises(SchemaError, match="converts empty tables only, and documents holds 1 rows"):
            migrate.upgrade(engine, partition_by_collection=True)
        with engine.connect() as conn:
            assert not is_partitioned(conn)
    finally:
        engine.dispose()


def test_the_cli_option_partitions_a_new_database(database_factory, settings, tmp_path):
    url = database_factory.create("rag_parts_cli")
    env = {**os.environ, "RAG_DATABASE_URL": url, "RAG_EMBEDDING_MODEL": "hashing", "RAG_DATA_DIR": str(tmp_path)}
    done = rag(env, "db", "upgrade", "--partition-by-collection")
    assert done.returncode == 0, done.stderr
    engine = make_engine(url, settings)
    try:
        with engine.connect() as conn:
            assert is_partitioned(conn)
    finally:
        engine.dispose()


def _graph_options(conn) -> set[str]:  # type: ignore[no-untyped-def]
    """The build parameters of every HNSW index on the chunk tables (the parent's and each partition's)."""
    return set(conn.execute(text(HNSW_BUILD_OPTIONS)).scalars())


def test_the_hnsw_rebuild_reaches_every_partition(partitioned, settings, tmp_path):
    for name, body in TEXTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    Indexer(Database(partitioned), HashingEmbedder(), settings).index_paths([tmp_path / "ops"], collection="alpha")
    migrate.downgrade(partitioned, "0011")
    with partitioned.connect() as conn:
        assert _graph_options(conn) == {"m=16,ef_construction=64"}
    migrate.upgrade(partitioned)
    with partitioned.connect() as conn:
        assert _graph_options(conn) == {"m=16,ef_construction=128"}
        assert conn.execute(text("SELECT count(*) FROM pg_indexes WHERE indexdef LIKE '%hnsw%'")).scalar() == 2
    service = UniversalRAGService(settings, database=Database(partitioned), embedder=HashingEmbedder(), reranker=None)
    result = service.retrieve("how do replicas replay the write-ahead log?", context="search", collection="alpha")
    assert result.chunks and result.chunks[0].source.endswith("ops/wal.md")


_PACKED_TRIGGERS = text(
    "SELECT tgname FROM pg_trigger WHERE tgrelid = 'document_chunks'::regclass AND tgname LIKE '%packed%' ORDER BY 1"
)


def test_the_packed_postings_triggers_are_on_a_partitioned_schema_and_migration_0017_restores_them(partitioned):
    expected = ["document_chunks_packed_delete", "document_chunks_packed_update"]
    with partitioned.connect() as conn:
        assert list(conn.execute(_PACKED_TRIGGERS).scalars()) == expected
    with partitioned.begin() as conn:  # a database partitioned before 0017: the conversion had left them out
        for name in expected:
            conn.execute(text(f"DROP TRIGGER {name} ON document_chunks"))
    migrate.downgrade(partitioned, "0016")
    migrate.upgrade(partitioned)
    with partitioned.connect() as conn:
        assert list(conn.execute(_PACKED_TRIGGERS).scalars()) == expected


def test_an_ingest_analyses_its_own_partitions_not_every_collections(partitioned, settings):
    """An ANALYZE of a partitioned parent analyses every partition: each new collection's ingest analysed all the
    others' too, so it took longer than the last (0.55 s for the first of 300 small collections, 1.06 s at the
    150th, 1.66 s at the 200th, ANALYZE most of it). Now only the collection's own partitions (and the plain
    tables, for a collection large enough to be planned by them)."""
    import hashlib

    from sqlalchemy import event

    db = Database(partitioned)
    indexer = Indexer(db, HashingEmbedder(), settings)
    body = "Replicas copy the index {}.\n\n## More\n\nThe WAL ships."
    texts = [(f"d{i}.md", "", f"# Doc {i}\n\n" + body.format(i)) for i in range(6)]
    assert indexer.index_texts(texts, collection="alpha").ok
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        sent.append(statement)

    event.listen(partitioned, "before_cursor_execute", record)
    try:
        assert indexer.index_texts(texts, collection="beta").ok
    finally:
        event.remove(partitioned, "before_cursor_execute", record)
    analysed = [s for s in sent if s.startswith(("ANALYZE", "VACUUM"))]
    tables = {t.strip().strip('"') for s in analysed for t in s.split(")")[-1].removeprefix("ANALYZE").split(",")}
    beta = hashlib.md5(b"beta").hexdigest()
    assert {f"documents_{beta}", f"document_chunks_{beta}", f"chunk_terms_{beta}"} <= tables, analysed
    assert not tables & {"documents", "document_chunks", "chunk_terms"}, analysed  # the parents: every partition
    assert not [t for t in tables if t.endswith(hashlib.md5(b"alpha").hexdigest())], analysed
    with partitioned.connect() as conn:
        rows = conn.execute(text("SELECT reltuples FROM pg_class WHERE relname = :t"), {"t": f"document_chunks_{beta}"})
        assert rows.scalar_one() > 0  # the planner knows the new partition's size


def test_a_misspelt_word_is_respelled_on_a_partitioned_schema(partitioned, settings):
    """With ``RAG_TYPO_CORRECTION``: the spelling look-ups read the collection's partitions of ``lexeme_stats`` and
    ``document_chunks``."""
    texts = [
        (f"r{i}.md", "", f"# Replicas {i}\n\nReplicas replay the write-ahead log of the primary, shard {i}.\n")
        for i in range(4)
    ]
    on = dataclasses.replace(settings, typo_correction=True)
    service = UniversalRAGService(on, database=Database(partitioned), embedder=HashingEmbedder(), reranker=None)
    assert service.index_texts(texts, collection="typo", strategy="markdown").added == 4
    overrides: dict[str, Any] = {"vector_weight": 0.0, "keyword_weight": 1.0, "min_relevance": 0.0}
    result = service.retrieve("how do replicsa replay", context="search", collection="typo", **overrides)
    assert result.metrics.degraded == ['query: searched "replicas" for "replicsa" (not a word of the collection)']
    assert len(result.chunks) == 4
