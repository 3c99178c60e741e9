"""Citus: a coordinator and 2 workers from the embedded binaries, the schema distributed by collection.

The cluster (``tests/citus_cluster.py``) is built and started once per session and always stopped.
Checked here: ``rag db upgrade`` distributes the five collection-keyed tables co-located, with the
row-level BM25 trigger; row triggers keep the same statistics as the statement triggers on one node;
ingest, reindex, prune, a switch of the embedding model and retrieve work; every search shape is one
single-shard router task; a search's ``SET LOCAL`` HNSW setting reaches the shard; the SciFact test
rankings equal those of one node.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from rag_service.config import Settings
from rag_service.db import citus, migrate, spelling
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.search import configure_vector_scan, explain
from rag_service.db.status import read_status
from rag_service.embed import HashingEmbedder
from rag_service.errors import EmbeddingMismatchError
from rag_service.evaluation import doc_text
from rag_service.evaluation.beir import BeirDataset, load_beir
from rag_service.evaluation.runner import EvalConfig, run_queries
from rag_service.ingest.graph import GraphBuilder
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.citus_cluster import CitusCluster, copy_collection
from tests.integration.test_bm25 import assert_stats_consistent
from tests.integration.test_model_switch import RolledEmbedder
from tests.integration.test_vector_storage import LONG_SECTION, vector_layout
from tests.unit.test_collection_predicates import SHAPES

pytestmark = pytest.mark.slow

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"

TEXTS = {
    "ops/wal.md": "# WAL\n\nReplicas replay the write-ahead log. Backups archive it nightly to object storage.\n",
    "ops/hnsw.md": "# HNSW\n\nAn HNSW graph finds near vectors; ef_search trades recall against speed per query.\n",
    "ops/bm25.md": "# BM25\n\nBM25 weighs rare terms up and long chunks down; postings live in chunk_terms.\n",
    "ops/citus.md": "# Citus\n\nCitus shards tables by a distribution column; one collection lives on one shard.\n",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[CitusCluster]:
    started = CitusCluster.start(workers=2, shards=8)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def citus_engine(cluster: CitusCluster) -> Iterator[Engine]:
    settings = Settings(database_url=cluster.coordinator.url, pool_size=2, pool_max_overflow=2)
    engine = make_engine(cluster.coordinator.url, settings)
    migrate.upgrade(engine)  # what `rag db upgrade` runs
    yield engine
    engine.dispose()


def _stats(conn: Connection) -> dict[str, list[Any]]:
    """The BM25 statistics, chunk ids left out (each database numbers its chunks itself)."""
    return {
        "postings": conn.execute(
            text("SELECT collection, lexeme, tf, doc_len FROM chunk_terms ORDER BY 1, 2, 3, 4")
        ).all(),
        "lexemes": conn.execute(text("SELECT collection, lexeme, doc_freq FROM lexeme_stats ORDER BY 1, 2")).all(),
        "sizes": conn.execute(
            text("SELECT collection, chunk_count, total_length FROM collection_stats ORDER BY 1")
        ).all(),
        "context sizes": conn.execute(
            text("SELECT collection, context_count, context_length FROM context_stats ORDER BY 1")
        ).all(),
        "contexts": conn.execute(
            text("SELECT collection, context_start, lexeme, tf FROM context_terms ORDER BY 1, 2, 3, 4")
        ).all(),
        "context vectors": conn.execute(
            text("SELECT collection, context_start, length, embedding::text FROM document_contexts ORDER BY 1, 2, 3, 4")
        ).all(),
    }


def _edges(conn: Connection) -> list[Any]:
    """The chunk graph by the chunks' texts (each database numbers its chunks itself); the nearest of near-equal
    chunks depend on each HNSW graph's build, so the similarity edges are compared by their number."""
    return conn.execute(
        text(
            "SELECT e.collection, e.kind, CASE WHEN e.kind = 'similar' THEN count(*) OVER w END, "
            "CASE WHEN e.kind <> 'similar' THEN s.content END, CASE WHEN e.kind <> 'similar' THEN t.content END "
            "FROM chunk_edges e "
            "JOIN document_chunks s ON s.collection = e.collection AND s.id = e.source_chunk_id "
            "JOIN document_chunks t ON t.collection = e.collection AND t.id = e.target_chunk_id "
            "WINDOW w AS (PARTITION BY e.collection, e.kind) ORDER BY 1, 2, 3, 4, 5"
        )
    ).all()


def _write_everything(db: Database, settings: Settings, folder: Path) -> None:
    """Insert (two collections), update (a changed file and a direct UPDATE), cascade delete, prune."""
    indexer = Indexer(db, HashingEmbedder(), settings)
    for name, body in TEXTS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(body * 3)
    assert indexer.index_paths([folder / "ops"], collection="alpha").failed == []
    assert indexer.index_paths([folder / "ops"], collection="beta").failed == []
    (folder / "ops/wal.md").write_text(TEXTS["ops/wal.md"] + "Streaming replicas follow the primary closely.\n")
    assert indexer.index_paths([folder / "ops"], collection="alpha").updated == 1
    with db.transaction() as session:
        session.execute(
            text(
                "UPDATE document_chunks SET content_tsv = to_tsvector('english', content || ' extra words') "
                "WHERE collection = 'beta' AND chunk_index = 0"
            )
        )
        session.execute(text("DELETE FROM documents WHERE collection = 'beta' AND source = 'ops/bm25.md'"))
    (folder / "ops/hnsw.md").unlink()
    assert indexer.index_paths([folder / "ops"], collection="alpha", prune=True).deleted == 1
    twins = [("twin-a.md", "", LONG_SECTION), ("twin-b.md", "", LONG_SECTION.replace("order", "sequence"))]
    assert indexer.index_texts(twins, collection="beta", strategy="markdown").added == 2  # edges, both kinds


def test_upgrade_distributes_the_tables_by_collection_colocated(citus_engine):
    with citus_engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT logicalrelid::regclass::text, column_to_column_name(logicalrelid, partkey), colocationid "
                "FROM pg_dist_partition ORDER BY 1"
            )
        ).all()
        triggers = set(
            conn.execute(
                text("SELECT tgname FROM pg_trigger WHERE tgrelid = 'document_chunks'::regclass AND NOT tgisinternal")
            ).scalars()
        )
    assert {name for name, _, _ in rows} == set(citus.DISTRIBUTED_TABLES)
    assert {column for _, column, _ in rows} == {"collection"}
    assert len({colocation for _, _, colocation in rows}) == 1
    assert "document_chunks_stats_row" in triggers
    assert not triggers & {"document_chunks_stats_insert", "document_chunks_stats_delete"}
    migrate.upgrade(citus_engine)  # again: nothing left to do
    with citus_engine.begin() as conn:
        assert citus.distribute(conn) == []


def test_status_describes_the_cluster_and_sizes_the_shards(citus_engine, tmp_path):
    """``rag db status`` on a coordinator: its workers, the shards' sizes (the coordinator's own tables are empty
    shells), and no claim of the rag_bm25 extension, which Citus never uses."""
    Indexer(Database(citus_engine), HashingEmbedder(), Settings()).index_texts(
        [("sized.md", "", f"# Sized\n\n{LONG_SECTION}\n")], collection="sized"
    )
    lines = read_status(citus_engine).lines()
    layout = r"^layout: +Citus coordinator, 2 workers \(\S+ up, \S+ up\), 8 shards of each table"
    assert re.search(layout, "\n".join(lines), re.MULTILINE), lines
    assert any(line.startswith("rag_bm25:   not used on Citus") for line in lines)
    sizes = {kind_name: size for kind, kind_name, size in read_status(citus_engine).sizes if kind == "on the workers"}
    assert sizes["document_chunks"] > 64 * 1024 and sizes["indexes of document_chunks"] > sizes["document_chunks"]
    with citus_engine.begin() as conn:
        conn.execute(text("DELETE FROM documents WHERE collection = 'sized'"))


def test_row_triggers_keep_the_statistics_the_statement_triggers_keep(
    database_factory, settings, citus_engine, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    found = {}
    for mode in ("statement", "row"):
        engine = make_engine(database_factory.create(f"rag_{mode}"), settings)
        try:
            migrate.upgrade(engine)
            if mode == "row":
                with engine.begin() as conn:
                    citus.use_row_level_stats(conn)
            folder = tmp_path / mode
            _write_everything(Database(engine), settings, folder)
            with engine.connect() as conn:
                assert_stats_consistent(conn)
                found[mode] = {**_stats(conn), "edges": _edges(conn)}
        finally:
            engine.dispose()
    assert found["row"] == found["statement"]
    assert len(found["row"]["postings"]) > 100 and {r[0] for r in found["row"]["sizes"]} == {"alpha", "beta"}
    assert found["row"]["edges"] and found["row"]["context vectors"]

    # the same writes on Citus (row triggers on the shards) end in the same statistics
    citus_settings = Settings(database_url=str(citus_engine.url), pool_size=2, pool_max_overflow=2)
    _write_everything(Database(citus_engine), citus_settings, tmp_path / "citus")
    with citus_engine.connect() as conn:
        assert {**_stats(conn), "edges": _edges(conn)} == found["statement"]
        assert_stats_consistent(conn)
        conn.execute(text("DELETE FROM documents WHERE collection IN ('alpha', 'beta')"))
        conn.commit()


def test_ingest_reindex_prune_and_retrieve_on_citus(citus_engine, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    settings = Settings(database_url=str(citus_engine.url), pool_size=2, pool_max_overflow=2)
    service = UniversalRAGService(settings, database=Database(citus_engine), embedder=HashingEmbedder(), reranker=None)
    for name, body in TEXTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body * 3)
    try:
        assert service.index_paths([tmp_path / "ops"], collection="kb").added == 4
        assert service.index_paths([tmp_path / "ops"], collection="kb").unchanged == 4
        result = service.retrieve("how do replicas replay the write-ahead log?", context="search", collection="kb")
        assert result.chunks and result.chunks[0].source == "ops/wal.md"
        assert result.metrics.degraded == []

        reindexed = service.reindex_all(collection="kb")
        assert reindexed.failed == [] and reindexed.updated == 4
        # its keyword UPDATE named no collection: "CTEs that refer to other subqueries are not supported in
        # multi-shard queries" (audit 51d)
        for scope in ("kb", None):
            built = service.build_metadata(collection=scope)
            assert built.collections == ["kb"] and built.chunks > 0 and built.degraded == [], built.lines()
        (tmp_path / "ops/citus.md").unlink()
        assert service.index_paths([tmp_path / "ops"], collection="kb", prune=True).deleted == 1
        result = service.retrieve("which column shards tables?", context="search", collection="kb")
        assert "ops/citus.md" not in {c.source for c in result.chunks}
        assert [c.name for c in service.collections()] == ["kb"]
        with citus_engine.connect() as conn:
            assert_stats_consistent(conn)
        (tmp_path / "long").mkdir()
        (tmp_path / "long/restores.md").write_text(f"# Operations\n\n{LONG_SECTION}\n")
        assert service.index_paths([tmp_path / "long"], collection="kb").added == 1
        with citus_engine.connect() as conn:  # the shards keep the vectors in the row (migration 0010)
            large, out_of_line = vector_layout(conn)
            assert large > 0 and out_of_line == 0
    finally:
        with citus_engine.begin() as conn:
            conn.execute(text("DELETE FROM documents WHERE collection = 'kb'"))


def test_a_model_switch_on_citus(citus_engine):
    """``reindex --all`` with another model: its marker lives in a coordinator table, read beside the shards."""
    settings = Settings(database_url=str(citus_engine.url), pool_size=2, pool_max_overflow=2)
    db = Database(citus_engine)
    rolled = RolledEmbedder(model_id="test/rolled-hashing")
    try:
        texts = [(name, name, body) for name, body in TEXTS.items()]
        assert Indexer(db, HashingEmbedder(), settings).index_texts(texts, collection="switch").added == 4
        report = Indexer(db, rolled, settings).reindex_all(switch_model=True)
        assert report.ok and report.model_switch.startswith("embedding model: switched from 'test/hashing-embedder'")
        service = UniversalRAGService(settings, database=db, embedder=rolled, reranker=None)
        result = service.retrieve("which column shards tables?", context="search", collection="switch")
        assert result.chunks and result.chunks[0].source == "ops/citus.md"
    finally:
        with citus_engine.begin() as conn:
            conn.execute(text("DELETE FROM documents WHERE collection = 'switch'"))
        back = Indexer(db, HashingEmbedder(), settings).reindex_all(switch_model=True)
        assert back.ok  # the module's other tests index with the hashing model


def test_a_new_database_on_citus_takes_the_dimension_of_its_first_model(cluster):
    """The first write's ALTER of the vector columns (``db.vector_columns``) reaches every shard: a 768-d model
    writes, searches, and a 384-d one is refused after it."""
    url = cluster.create_database("rag_wide")
    settings = Settings(database_url=url, pool_size=2, pool_max_overflow=2)
    engine = make_engine(url, settings)
    wide = HashingEmbedder(dim=768, model_id="test/wide")
    try:
        migrate.upgrade(engine)
        texts = [(name, name, body) for name, body in TEXTS.items()]
        assert Indexer(Database(engine), wide, settings).index_texts(texts, collection="kb").added == 4
        with engine.connect() as conn:
            shard_types = conn.execute(
                text(
                    "SELECT DISTINCT result FROM run_command_on_shards('document_chunks', $$SELECT "
                    "format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = '%s'::regclass AND attname = 'embedding'$$)"
                )
            ).all()
            assert shard_types == [("vector(768)",)]
        service = UniversalRAGService(settings, database=Database(engine), embedder=wide, reranker=None)
        result = service.retrieve("which column shards tables?", context="search", collection="kb")
        assert result.chunks and result.chunks[0].source == "ops/citus.md"
        with pytest.raises(EmbeddingMismatchError, match="makes 384-d vectors but this database stores 768-d"):
            Indexer(Database(engine), HashingEmbedder(), settings).index_texts(texts, collection="other")
    finally:
        engine.dispose()


def test_a_populated_database_on_citus_switches_to_a_model_of_another_dimension(cluster):
    """``rag reindex --all`` with a 768-d model (``db.vector_columns``): the columns are opened and closed on every
    shard, the HNSW index of every shard is rebuilt, and the new model searches."""
    url = cluster.create_database("rag_resize")
    settings = Settings(database_url=url, pool_size=2, pool_max_overflow=2)
    engine = make_engine(url, settings)
    wide = HashingEmbedder(dim=768, model_id="test/wide")
    shard_columns = text(
        "SELECT DISTINCT result FROM run_command_on_shards('document_chunks', $$SELECT format_type(atttypid, "
        "atttypmod) FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'embedding'$$)"
    )
    shard_graphs = text(
        "SELECT DISTINCT result FROM run_command_on_shards('document_chunks', $$SELECT count(*) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE i.indrelid = '%s'::regclass AND a.amname = 'hnsw'$$)"
    )
    try:
        migrate.upgrade(engine)
        texts = [(name, name, body) for name, body in TEXTS.items()]
        narrow = Indexer(Database(engine), HashingEmbedder(), settings)
        assert narrow.index_texts(texts, collection="kb").added == 4
        assert narrow.index_texts(texts[:2], collection="other").added == 2
        report = Indexer(Database(engine), wide, settings).reindex_all(switch_model=True)
        assert report.ok and report.updated == 6 and "switched from" in report.model_switch
        with engine.connect() as conn:
            assert conn.execute(shard_columns).all() == [("vector(768)",)]
            assert conn.execute(shard_graphs).all() == [("1",)]
        service = UniversalRAGService(settings, database=Database(engine), embedder=wide, reranker=None)
        result = service.retrieve("which column shards tables?", context="search", collection="kb")
        assert result.chunks and result.chunks[0].source == "ops/citus.md"
    finally:
        engine.dispose()


#: the build parameters of every HNSW index of a node (the parent's, each partition's or shard's)
HNSW_BUILD_OPTIONS = (
    "SELECT array_to_string(c.reloptions, ',') FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'hnsw'"
)


def test_the_hnsw_rebuild_migration_runs_on_citus(cluster, citus_engine):
    """Migration 0012 drops and recreates a distributed index: every shard gets the new graph."""
    settings = Settings(database_url=str(citus_engine.url), pool_size=2, pool_max_overflow=2)
    db = Database(citus_engine)
    try:
        texts = [(name, name, body) for name, body in TEXTS.items()]
        assert Indexer(db, HashingEmbedder(), settings).index_texts(texts, collection="graph").added == 4
        migrate.downgrade(citus_engine, "0011")
        migrate.upgrade(citus_engine)
        options = set()
        for node in cluster.nodes[1:]:
            with node.connect() as conn:
                rows = conn.execute(HNSW_BUILD_OPTIONS).fetchall()
                assert rows, "every worker holds shards of the graph"
                options |= {row[0] for row in rows}
        assert options == {"m=16,ef_construction=128"}
        service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
        result = service.retrieve("which column shards tables?", context="search", collection="graph")
        assert result.chunks and result.chunks[0].source == "ops/citus.md"
    finally:
        with citus_engine.begin() as conn:
            conn.execute(text("DELETE FROM documents WHERE collection = 'graph'"))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_search_shape_is_one_single_shard_router_task(citus_engine, shape):
    request = SHAPES[shape]
    with Database(citus_engine).transaction() as session:
        plan = explain(session, request)
    short = re.sub(r"'\[[-0-9.,e]+\]'", "'[...]'", plan)  # the query vector, 384 numbers
    assert re.search(r"^\s*Task Count: 1$", plan, re.MULTILINE), short
    assert plan.count("->  Task") == 1, short


def _ef_search_on_the_shard(session: Session) -> str | None:
    """``hnsw.ef_search`` as the shard holding collection ``probe`` sees it (a router query's target
    list runs on the worker); the inserted row, never committed, gives the query a row to return."""
    session.execute(
        text(
            "INSERT INTO documents (collection, source, content, content_hash, chunker) "
            "VALUES ('probe', 'probe.md', 'x', 'h', 'c')"
        )
    )
    return session.execute(
        text("SELECT current_setting('hnsw.ef_search', true) FROM documents WHERE collection = 'probe'")
    ).scalar_one()


def test_the_hnsw_setting_of_a_search_reaches_the_shard(citus_engine):
    with Session(citus_engine) as session:  # closed without commit: rolled back
        # set on the coordinator only (set_config is not propagated): the shard does not see it
        session.execute(text("SELECT set_config('hnsw.ef_search', '77', true)"))
        assert session.execute(text("SHOW hnsw.ef_search")).scalar_one() == "77"
        assert _ef_search_on_the_shard(session) != "77"
    with Session(citus_engine) as session:
        configure_vector_scan(session, ef_search=123)  # what every search runs first
        assert _ef_search_on_the_shard(session) == "123"


#: each side's queries run in this many slices at once: a Citus search waits mostly on its shard's
#: round trips (the coordinator's process used ~15% of a core), so one stream left the cores idle
SCIFACT_SLICES = 3


def _scifact_run(service: UniversalRAGService, dataset: BeirDataset) -> dict[str, dict[str, float]]:
    config = EvalConfig(context="search", retriever="hybrid", rerank=False, depth=None)  # the preset's depth
    return run_queries(service, dataset, config, collection="scifact", name="scifact", progress=False).run


def _query_slices(dataset: BeirDataset) -> list[BeirDataset]:
    """The dataset's queries dealt into ``SCIFACT_SLICES`` datasets (every query in exactly one)."""
    ids = list(dataset.queries)
    return [
        dataclasses.replace(dataset, queries={qid: dataset.queries[qid] for qid in ids[start::SCIFACT_SLICES]})
        for start in range(SCIFACT_SLICES)
    ]


def test_scifact_rankings_on_citus_equal_one_node(citus_engine, database_factory, settings):
    """Full SciFact (hashing embedder), every test query: the same document rankings and scores.

    The corpus is indexed once, by the Indexer, on one node, then copied into the cluster and
    its statistics recomputed there (the ingest path and the row trigger run on Citus in the tests
    above, on a small corpus). The HNSW graph is
    built with random levels, so two builds can differ in what an approximate scan returns: both
    sides drop it and scan exactly, which makes the comparison about the SQL (BM25 statistics,
    fusion, ties), the part Citus could change. So the index is dropped before indexing, and the
    chunk graph's similarity edges, found through it and neither copied nor used by the compared
    preset (its graph weight is 0, checked), are left out: 3x less indexing time. The two sides
    answer their 300 queries at the same time (two servers), each in ``SCIFACT_SLICES`` streams.
    """
    assert SCIFACT.is_dir(), f"{SCIFACT} is missing: the SciFact dataset comes with ../shared/datasets"
    one_node = make_engine(database_factory.create("rag_scifact"), settings)
    citus_settings = Settings(database_url=str(citus_engine.url), pool_size=2, pool_max_overflow=2)
    # keywords, summaries and graph edges are not what is compared: leave the costly ones out
    # no packed postings on one node either: Citus keeps the bounded BM25 arm (db.packed_postings)
    plain = dataclasses.replace(settings, chunk_keywords=0, summary_sentences=0, bm25_packed_min_chunks=0)
    try:
        migrate.upgrade(one_node)
        for engine in (one_node, citus_engine):
            with engine.begin() as conn:
                conn.execute(text("DROP INDEX IF EXISTS ix_document_chunks_embedding_hnsw"))
        services = {
            "one node": UniversalRAGService(
                plain, database=Database(one_node), embedder=HashingEmbedder(), reranker=None
            ),
            "citus": UniversalRAGService(
                citus_settings, database=Database(citus_engine), embedder=HashingEmbedder(), reranker=None
            ),
        }
        dataset = load_beir(SCIFACT, split="test")
        # what ensure_indexed gives the service's Indexer, without similarity edges (see above)
        indexer = Indexer(Database(one_node), HashingEmbedder(), plain, graph=GraphBuilder(neighbours=0))
        items = ((doc.doc_id, doc.title, doc_text(doc)) for doc in dataset.corpus.values())
        total = len(dataset.corpus)  # given, as ensure_indexed gives it: a new collection's first index loads in bulk
        report = indexer.index_texts(items, collection="scifact", strategy="recursive", total=total)
        assert report.failed == [] and report.added == len(dataset.corpus)
        copy_collection(one_node, citus_engine, "scifact")
        with one_node.connect() as a, citus_engine.connect() as b:
            assert _stats(b) == _stats(a)  # one node's triggers kept what a recount gives
            for conn in (a, b):  # the edges left out play no part in the compared rankings
                weight = "SELECT graph_weight FROM rag_configurations WHERE context_type = 'search'"
                assert conn.execute(text(weight)).scalar_one() == 0
        slices = _query_slices(dataset)
        with ThreadPoolExecutor(max_workers=len(services) * len(slices)) as pool:
            answers = {
                side: [pool.submit(_scifact_run, svc, part) for part in slices] for side, svc in services.items()
            }
            runs = {side: {q: r for part in parts for q, r in part.result().items()} for side, parts in answers.items()}
    finally:
        one_node.dispose()  # the cluster goes with the module: no cascade of 21k rows through the trigger
    assert len(runs["citus"]) == len(dataset.queries) == 300
    # the same documents in the same order with the same scores; scores compared to 1e-9, since a
    # shard may add a query's BM25 terms in another order (seen: 0.7763849377197176 against ...178)
    assert _ranked(runs["citus"]) == _ranked(runs["one node"])
    for qid, scores in runs["one node"].items():
        assert runs["citus"][qid] == pytest.approx(scores, rel=1e-9, abs=1e-12), qid


def _ranked(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """Each query's documents best first, ties (to 1e-9) by document id."""
    return {qid: sorted(docs, key=lambda d: (-round(docs[d], 9), d)) for qid, docs in run.items()}


def test_a_misspelt_word_is_respelled_on_the_collections_shard(citus_engine):
    """With ``RAG_TYPO_CORRECTION``: the spelling look-ups (``lexeme_stats``, then the chunks holding a stem) are
    single-shard router tasks, like the searches."""
    settings = Settings(database_url=str(citus_engine.url), pool_size=2, pool_max_overflow=2, typo_correction=True)
    service = UniversalRAGService(settings, database=Database(citus_engine), embedder=HashingEmbedder(), reranker=None)
    texts = [
        (f"r{i}.md", "", f"# Replicas {i}\n\nReplicas replay the write-ahead log of the primary, shard {i}.\n")
        for i in range(4)
    ]
    params = {"collection": "typo", "fts_config": "english", "min_doc_freq": 3, "sample": 64, "ranked": 8, "deep": 1024}
    try:
        assert service.index_texts(texts, collection="typo", strategy="markdown").added == 4
        overrides: dict[str, Any] = {"vector_weight": 0.0, "keyword_weight": 1.0, "min_relevance": 0.0}
        result = service.retrieve("how do replicsa replay", context="search", collection="typo", **overrides)
        assert result.metrics.degraded == ['query: searched "replicas" for "replicsa" (not a word of the collection)']
        assert len(result.chunks) == 4
        with Session(citus_engine) as session:
            for statement, values in (
                (spelling._KNOWN, {"words": ["replicsa"]}),
                (spelling._CANDIDATES, {"candidates": ["replicas", "does"]}),
            ):
                plan = "\n".join(session.execute(text("EXPLAIN " + statement.text), {**params, **values}).scalars())
                assert re.search(r"^\s*Task Count: 1$", plan, re.MULTILINE), plan
    finally:
        with citus_engine.begin() as conn:
            conn.execute(text("DELETE FROM documents WHERE collection = 'typo'"))
