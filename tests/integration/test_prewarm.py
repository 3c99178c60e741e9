"""``warm_up`` reads the HNSW graphs into shared_buffers (``db/prewarm.py``): evicted pages come back, a graph
over the budget is left out and said so, a role that may not create ``pg_prewarm`` gets a line, not an error."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from sqlalchemy import Engine, make_url, text

from rag_service.config import SCHEMA_EMBEDDING_DIM, Settings
from rag_service.db import migrate
from rag_service.db.admin import admin_params
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.prewarm import ensure_prewarm_extension, prewarm_graphs, prewarm_search_servers
from rag_service.db.replicas import ReadRouter
from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService
from tests.vector_rows import insert_vectors

_CACHED = text(
    "SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode(CAST(:name AS regclass)) "
    "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
_EVICT = text(
    "SELECT count(pg_buffercache_evict(bufferid)) FROM pg_buffercache "
    "WHERE relfilenode = pg_relation_filenode(CAST(:name AS regclass)) "
    "AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def _fill(database: Database, collection: str, chunks: int) -> None:
    """``chunks`` random unit vectors in one document of ``collection`` (pages enough for a real graph)."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(chunks, SCHEMA_EMBEDDING_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with database.transaction() as session:
        insert_vectors(session, collection, vectors)


def _graph(database: Database) -> str:
    with database.transaction() as session:
        return str(
            session.execute(
                text(
                    "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_am am ON am.oid = c.relam "
                    "WHERE am.amname = 'hnsw' AND c.relkind = 'i' AND pg_relation_size(c.oid) > 8192"
                )
            ).scalar_one()
        )


def _cached_and_blocks(database: Database, graph: str) -> tuple[int, int]:
    with database.transaction() as session:
        cached = int(session.execute(_CACHED, {"name": graph}).scalar_one())
        size = int(session.execute(text("SELECT pg_relation_size(CAST(:n AS regclass))"), {"n": graph}).scalar_one())
    return cached, size // 8192


@pytest.fixture
def cache_probe(fresh_database: Database) -> Database:
    with fresh_database.transaction() as session:
        session.execute(text("CREATE EXTENSION IF NOT EXISTS pg_buffercache"))
    return fresh_database


def test_an_evicted_graph_is_read_back_whole(cache_probe):
    db = cache_probe
    _fill(db, "c", 600)
    graph = _graph(db)
    assert ensure_prewarm_extension(db) is None  # the test server's role is a superuser: it may create it
    with db.transaction() as session:
        session.execute(_EVICT, {"name": graph})
    cached, blocks = _cached_and_blocks(db, graph)
    assert blocks > 10 and cached < blocks, "the eviction left the graph out of shared_buffers"
    done = prewarm_graphs(db)
    assert [name for name, _ in done.graphs] == [graph] and not done.left_out and done.skipped is None
    assert _cached_and_blocks(db, graph) == (blocks, blocks)


def test_a_graph_over_the_budget_is_left_out_and_named(cache_probe):
    db = cache_probe
    _fill(db, "c", 300)
    graph = _graph(db)
    ensure_prewarm_extension(db)
    with db.transaction() as session:
        session.execute(_EVICT, {"name": graph})
    done = prewarm_graphs(db, share=0.0)
    assert not done.graphs and [name for name, _ in done.left_out] == [graph]
    assert "left out, over 0% of shared_buffers: " + graph in done.line("primary")
    assert _cached_and_blocks(db, graph)[0] == 0


def test_every_partition_graph_is_read(database_factory, settings: Settings):
    engine = make_engine(database_factory.create("rag_prewarm_parts"), settings)
    try:
        migrate.upgrade(engine, partition_by_collection=True)
        db = Database(engine)
        from rag_service.db.partitions import prepare_collection

        for collection in ("a", "b"):
            with db.transaction() as session:
                prepare_collection(session, collection)
            _fill(db, collection, 200)
        ensure_prewarm_extension(db)
        names = [name for name, _ in prewarm_graphs(db).graphs]
        assert len(names) == 2 and all(name.startswith("document_chunks_") for name in names), names
    finally:
        engine.dispose()


@pytest.fixture
def plain_role_database(fresh_database: Database, settings: Settings) -> Iterator[Database]:
    """``fresh_database`` seen by a new role that is no superuser (it may not create ``pg_prewarm``)."""
    role = f"rag_plain_{uuid.uuid4().hex[:8]}"
    url = fresh_database.engine.url.render_as_string(hide_password=False)
    with psycopg.connect(**admin_params(url)) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
    engine: Engine = make_engine(make_url(url).set(username=role).render_as_string(hide_password=False), settings)
    yield Database(engine)
    engine.dispose()
    with psycopg.connect(**admin_params(url)) as admin:
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')


def test_a_role_that_may_not_create_the_extension_gets_a_line(plain_role_database):
    lines = prewarm_search_servers(ReadRouter(plain_role_database))
    assert lines == [
        "primary: HNSW graphs not prewarmed (pg_prewarm is not installed in this database; "
        "a superuser can CREATE EXTENSION pg_prewarm)"
    ]


def test_warm_up_reads_the_graph_before_the_first_search(cache_probe, settings: Settings, caplog):
    db = cache_probe
    _fill(db, "c", 600)
    graph = _graph(db)
    with db.transaction() as session:
        session.execute(_EVICT, {"name": graph})
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    with caplog.at_level(logging.INFO, logger="rag_service.db.prewarm"):
        assert service.warm_up() is None
    cached, blocks = _cached_and_blocks(db, graph)
    assert cached == blocks
    assert any(r.getMessage().startswith("primary: HNSW graphs read into shared_buffers in ") for r in caplog.records)
