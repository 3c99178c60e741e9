#!/usr/bin/env python3
"""Citus (a coordinator and 2 workers on this machine) against one node: the same corpus, the same requests.

The synthetic corpus of ``scripts/bench.py`` (100k chunks by default, one collection) is loaded on
one node by ``bench_lib.store.ensure_loaded`` (reused when present), then copied into a fresh Citus
cluster from the embedded binaries (``tests/citus_cluster.py``): ``migrate.upgrade`` distributes the
tables by collection, the rows go in by binary COPY with the row trigger off, the BM25 statistics
are recounted set-based and the GIN and HNSW indexes built after the load, each step timed. The
statistics of both sides are compared. Every node has the one node's ``shared_buffers``, and both
sides read what a search uses into it (``pg_prewarm``) before timing. Then the vector arm, the BM25 arm, the hybrid statement and
``retrieve()`` (MiniLM query embedding, no rerank) run on both, interleaved in one loop so that
load from elsewhere slows both alike, then a throughput run with concurrent clients, and finally
the ingestion of new documents through the service (where Citus keeps the BM25 statistics with its
row-level trigger).

Every node shares this machine's cores: this measures what the coordinator hop costs a query, not
what more machines would add. One collection is one shard group, so all of it lives on one worker.

    .venv/bin/python scripts/bench_citus.py --size 100000
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.citus_cluster

import bench
import psycopg
from bench_lib import corpus as synth
from bench_lib import measure, retrievers, store
from sqlalchemy import Engine, text

from rag_service.config import Settings, load_settings
from rag_service.db import citus, migrate
from rag_service.db.admin import admin_params
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.presets import load_preset
from rag_service.embed import HashingEmbedder, SentenceTransformerEmbedder
from rag_service.service import UniversalRAGService
from tests.citus_cluster import CitusCluster, copy_collection

ARMS = ("ours_vector", "ours_fulltext", "ours_hybrid", "ours_retrieve")
SIDES = ("one_node", "citus")

# what one side's BM25 statistics add up to (the row-by-row comparison of the tests, summed)
_STATS_SQL = {
    "chunks": "SELECT count(*), coalesce(sum(lexeme_count), 0) FROM document_chunks WHERE collection = :c",
    "postings": "SELECT count(*), coalesce(sum(tf), 0), coalesce(sum(doc_len), 0) FROM chunk_terms WHERE collection = :c",
    "lexemes": "SELECT count(*), coalesce(sum(doc_freq), 0) FROM lexeme_stats WHERE collection = :c",
    "collection": "SELECT chunk_count, total_length FROM collection_stats WHERE collection = :c",
}


def statistics_of(engine: Engine) -> dict[str, list[int]]:
    """Counts and sums of the chunks and the BM25 tables of the benchmark collection."""
    with engine.connect() as conn:
        return {
            k: [int(v) for v in conn.execute(text(q), {"c": store.COLLECTION}).one()] for k, q in _STATS_SQL.items()
        }


def load_cluster(
    cluster: CitusCluster, one_node: Engine, settings: Settings, size: int
) -> tuple[Engine, dict[str, Any]]:
    """Distribute the schema on the coordinator, copy the collection in and index it; returns the
    coordinator's engine and the timings."""
    memory = f"{size // 400_000 + 1}GB"  # as the one node's build: the HNSW graph must fit
    for node in cluster.nodes:
        with node.connect() as conn:
            conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{memory}'")
            conn.execute("SELECT pg_reload_conf()")
    engine = make_engine(cluster.coordinator.url, dataclasses.replace(settings, database_url=cluster.coordinator.url))
    timings: dict[str, Any] = {}
    started = time.perf_counter()
    migrate.upgrade(engine)
    timings["upgrade_and_distribute_s"] = round(time.perf_counter() - started, 1)
    with engine.begin() as conn:
        conn.execute(text(f"DROP INDEX {store.HNSW_INDEX}"))
        conn.execute(text(f"DROP INDEX {store.GIN_INDEX}"))
    print("copying the collection into the cluster ...", flush=True)
    started = time.perf_counter()
    copy_collection(one_node, engine, store.COLLECTION)
    timings["copy_and_recount_s"] = round(time.perf_counter() - started, 1)
    for key, ddl in (("gin_build_s", store.GIN_DDL), ("hnsw_build_s", store.HNSW_DDL)):
        print(f"{key.removesuffix('_s').replace('_', ' ')} on the shards ...", flush=True)
        started = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(text("SET LOCAL statement_timeout = 0"))
            conn.execute(text(ddl))
        timings[key] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SET statement_timeout = 0"))
        for table in citus.DISTRIBUTED_TABLES:  # the postings too: their index-only scans need the visibility map
            conn.execute(text(f"VACUUM ANALYZE {table}"))
    timings["analyze_s"] = round(time.perf_counter() - started, 1)
    print(f"loaded: {timings}", flush=True)
    return engine, timings


def placement(engine: Engine) -> dict[str, Any]:
    """Which worker holds the benchmark collection's shard of document_chunks, and its size."""
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT s.nodename || ':' || s.nodeport, pg_size_pretty(s.shard_size), "
                "(SELECT count(*) FROM citus_shards WHERE table_name = 'document_chunks'::regclass) "
                "FROM citus_shards s WHERE s.table_name = 'document_chunks'::regclass "
                "AND s.shardid = get_shard_id_for_distribution_column('document_chunks', CAST(:c AS text))"
            ),
            {"c": store.COLLECTION},
        ).one()
        workers = conn.execute(text("SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0"))
        return {"node": row[0], "shard_size": row[1], "shards": int(row[2]), "workers": int(workers.scalar_one())}


INGEST_COLLECTION = "bench-ingest"


def ingest_seconds(engine: Engine, settings: Settings, corpus: synth.Corpus, documents: int) -> float:
    """Seconds to index ``documents`` synthetic documents through the service into a new collection
    (hashing embedder: no model time; keywords and summaries off: their cost is the same on both)."""
    plain = dataclasses.replace(settings, database_url=str(engine.url), chunk_keywords=0, summary_sentences=0)
    service = UniversalRAGService(plain, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
    items = [
        (f"ingest/{d:05d}.txt", f"Ingested {d}", "\n\n".join(corpus.texts[d * 10 : d * 10 + 10]))
        for d in range(documents)
    ]
    started = time.perf_counter()
    report = service.index_texts(items, collection=INGEST_COLLECTION, progress=True, total=documents)
    elapsed = time.perf_counter() - started
    assert report.failed == [] and report.added == documents, report
    with engine.begin() as conn:  # leave the reused one-node database as it was
        conn.execute(text("SET LOCAL statement_timeout = 0"))
        conn.execute(text("DELETE FROM documents WHERE collection = :c"), {"c": INGEST_COLLECTION})
    service.close()
    return elapsed


def throughput(run: Callable[[int], list[int]], indexes: list[int], clients: int) -> float:
    """Queries per second with ``clients`` threads each running its share of ``indexes``."""
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, indexes))
    return len(indexes) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=8, help="citus.shard_count")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients of the throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds per side, alternating")
    parser.add_argument("--ingest-docs", type=int, default=100, help="documents (10 chunks each) of the ingest run")
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "bench-citus.json")
    args = parser.parse_args()

    settings = load_settings()
    # no statement timeout: the copy reads a whole collection in one statement
    settings = dataclasses.replace(settings, pool_size=max(settings.pool_size, args.clients), statement_timeout_ms=0)
    url = bench.server_url(settings)
    vocabulary = synth.load_vocabulary(bench.DEFAULT_SCIFACT / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size, seed=42)
    name = f"rag_bench_{store.size_label(args.size)}"
    one_node_build = store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engines = {"one_node": store.engine_for(url, name, settings)}
    # every node gets the one node's shared_buffers
    cluster = CitusCluster.start(
        workers=args.workers, shards=args.shards, shared_buffers=settings.embedded_shared_buffers
    )
    try:
        engines["citus"], citus_build = load_cluster(cluster, engines["one_node"], settings, args.size)
        stats = {side: statistics_of(engine) for side, engine in engines.items()}
        assert stats["citus"] == stats["one_node"], stats
        where = placement(engines["citus"])
        with engines["citus"].begin() as conn:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_prewarm"))  # on every node
        warmed = {}
        with psycopg.connect(**admin_params(url, database=name)) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            warmed["one_node"] = store.prewarm(conn)
        for node in cluster.nodes[1:]:
            with node.connect() as conn:
                warmed[node.name] = store.prewarm(conn)
        work, _ = measure.make_workload(
            engines["one_node"], corpus, vocabulary.words, count=args.warmup + args.queries, seed=42
        )
        embedder = SentenceTransformerEmbedder()
        timed: dict[str, retrievers.RetrieverFn] = {}
        services = []
        for side, engine in engines.items():
            database = Database(engine)
            side_settings = dataclasses.replace(settings, database_url=str(engine.url))
            service = UniversalRAGService(side_settings, database=database, embedder=embedder, reranker=None)
            services.append(service)
            with database.transaction() as session:
                preset = load_preset(session, bench.PRESET)
            arms = retrievers.ours(database, side_settings, preset, work, service, [])
            timed.update({f"{side}:{arm}": arms[arm] for arm in ARMS})
        timed["numpy_exact"] = retrievers.numpy_exact(corpus, work)
        gc.collect()
        gc.freeze()
        load_before = measure.load_average()
        recorder, results, _ = measure.time_retrievers(
            timed, warmup=args.warmup, queries=args.queries, desc="one node vs citus", seed=42
        )
        hybrid = {side: timed[f"{side}:ours_hybrid"] for side in SIDES}
        indexes = list(range(args.warmup, args.warmup + args.queries))
        qps: dict[str, list[float]] = {side: [] for side in SIDES}
        for _ in range(args.rounds):
            for side in SIDES:
                qps[side].append(round(throughput(hybrid[side], indexes, args.clients), 1))
        ingest = {
            side: round(ingest_seconds(engine, settings, corpus, args.ingest_docs), 1)
            for side, engine in engines.items()
        }
        latency = measure.latency_summary(recorder)
        out = {
            "measured_at": bench._now(),
            "chunks": args.size,
            "loadavg_before": load_before,
            "loadavg_after": measure.load_average(),
            "one_node_build": one_node_build,
            "citus_build": citus_build,
            "citus_placement": where,
            "prewarmed_blocks": warmed,
            "statistics_equal": stats["citus"] == stats["one_node"],
            "statistics": stats["one_node"],
            "latency": latency,
            "p50_ratio_citus_over_one_node": {
                arm: round(latency[f"citus:{arm}"]["p50"] / latency[f"one_node:{arm}"]["p50"], 2) for arm in ARMS
            },
            # the BM25 arm is exact; the vector arm walks two HNSW graphs built apart
            "identical_lists": {
                arm: round(
                    statistics.mean(
                        a == b for a, b in zip(results[f"one_node:{arm}"], results[f"citus:{arm}"], strict=True)
                    ),
                    3,
                )
                for arm in ARMS
            },
            "overlap_at_20": {
                arm: measure.overlap_at_k(results[f"citus:{arm}"], results[f"one_node:{arm}"]) for arm in ARMS
            },
            "hnsw_recall_at_20": {
                side: measure.overlap_at_k(results[f"{side}:ours_vector"], results["numpy_exact"]) for side in SIDES
            },
            f"hybrid_qps_{args.clients}_clients": qps,
            f"ingest_{args.ingest_docs * 10}_chunks_s": ingest,
        }
        for service in services:
            service.close()
    finally:
        for engine in engines.values():
            engine.dispose()
        cluster.stop()
    bench.write_report(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
