#!/usr/bin/env python3
"""A lever for the vector arm on a large collection, measured, not built: the HNSW graph split in two halves.

Two partial HNSW indexes (``WHERE id % 2 = 0`` and ``= 1``, the product's ``m`` and ``ef_construction``) beside
the product's one; each question walks both halves at once on two connections (the second core) and merges the
two top-k by distance, against the one graph at the product's ``ef_search``. Also: the halves one after the
other on one connection (is the gain the smaller graphs or the second core?), and ``--hog`` (a busy process on
the other core). Recall@20 against numpy's exact search over the benchmark corpus's vectors, strict
(``measure.overlap_at_k``) and with ties (``measure.recall_with_ties``), as ``bench_one_node.py`` measures it.
Interleaved (``bench_lib.measure.time_retrievers``), the same real questions as ``bench_vector_arm.py``;
docs/benchmarks.md "Session 33".

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_split_graph.py --database rag_bulk_1m_bulk_real \
        --build --drop
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import bench
import numpy as np
import psycopg
from bench_lib import corpus as synth
from bench_lib import measure, real_text, retrievers, store
from pgvector.psycopg import register_vector

from rag_service.config import BUNDLED_MINILM, load_settings
from rag_service.db.admin import database_url
from rag_service.db.search import vector_scan_settings
from rag_service.embed import embedder_for

DATASETS = bench.REPO.parent / "shared" / "datasets"
Row = tuple[int, float]  # a chunk's id and its distance
_WALK = "SELECT id, embedding <=> %(q)s FROM document_chunks WHERE collection = 'bench' {half}"
_ORDER = "ORDER BY embedding <=> %(q)s LIMIT %(k)s"


def _half(h: int) -> str:
    return _WALK.format(half=f"AND id %% 2 = {h} ") + _ORDER


def build_halves(url: str) -> None:
    """The two partial graphs (a few minutes each at 1M on 2 cores)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SET statement_timeout = 0")
        admin.execute("SET maintenance_work_mem = '3GB'")
        for h in (0, 1):
            started = time.perf_counter()
            admin.execute(
                f"CREATE INDEX IF NOT EXISTS bench_split_half{h} ON document_chunks USING hnsw "
                f"(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 128) WHERE id % 2 = {h}"
            )
            print(f"half {h} built in {time.perf_counter() - started:.1f} s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--size", type=int, default=1_000_000, help="its chunks (the corpus's vectors are rebuilt)")
    parser.add_argument("--build", action="store_true", help="build the two partial graphs first")
    parser.add_argument("--drop", action="store_true", help="drop them at the end")
    parser.add_argument("--ef", default="300,400", help="ef_search values of the split walk")
    parser.add_argument("--single-ef", type=int, default=800, help="ef_search of the one graph")
    parser.add_argument("--hog", action="store_true", help="a busy process on the other core while timing")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "split_graph.json")
    args = parser.parse_args()

    settings = load_settings()
    url = database_url(bench.server_url(settings), args.database).replace("+psycopg", "")
    if args.build:
        build_halves(url)
    embedder = embedder_for(BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models")
    count, k = args.warmup + args.queries, retrievers.TOP_K
    texts = real_text.real_queries(DATASETS, per_set=count, seed=11)[:count]  # as bench_vector_arm's
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    vocabulary = synth.load_vocabulary(bench.DEFAULT_SCIFACT / "corpus.jsonl")
    corpus = real_text.benchmark_corpus(
        "real", size=args.size, datasets=DATASETS, data_dir=settings.data_dir, vocabulary=vocabulary
    )
    queries = synth.QuerySet(texts=texts, vectors=vectors, source_chunks=[-1] * count)
    exact = retrievers.numpy_exact(corpus, retrievers.Workload(queries=queries, frequent=queries))
    timed_range = range(args.warmup, count)
    truth = [exact(i) for i in timed_range]

    connections = [psycopg.connect(url) for _ in range(3)]
    for connection in connections:
        register_vector(connection)
    with psycopg.connect(url, autocommit=True) as monitor:
        monitor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        store.prewarm(monitor, ("ix_document_chunks_embedding_hnsw", "bench_split_half0", "bench_split_half1"))

    def walk(connection: psycopg.Connection[Any], sql: str, ef: int, i: int) -> list[Row]:
        with connection.transaction():
            connection.execute(vector_scan_settings(ef))
            return [(row[0], row[1]) for row in connection.execute(sql, {"q": vectors[i], "k": k}, prepare=True)]

    pool = ThreadPoolExecutor(2)

    def split(ef: int) -> Callable[[int], list[Row]]:
        def call(i: int) -> list[Row]:
            halves = [pool.submit(walk, connections[1 + h], _half(h), ef, i) for h in (0, 1)]
            return sorted(halves[0].result() + halves[1].result(), key=lambda row: row[1])[:k]

        return call

    def one_after_other(i: int) -> list[Row]:
        rows = walk(connections[1], _half(0), 400, i) + walk(connections[1], _half(1), 400, i)
        return sorted(rows, key=lambda row: row[1])[:k]

    def one_graph(i: int) -> list[Row]:
        return walk(connections[0], _WALK.format(half="") + _ORDER, args.single_ef, i)

    timed: dict[str, Callable[[int], Any]] = {f"one_graph_ef{args.single_ef}": one_graph}
    timed.update({f"split_ef{ef}": split(int(ef)) for ef in args.ef.split(",")})
    timed["halves_one_after_other_ef400"] = one_after_other
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.hog else None
    gc.collect()
    gc.freeze()
    try:
        recorder, results, _ = measure.time_retrievers(
            timed, warmup=args.warmup, queries=args.queries, desc="split", seed=42
        )
    finally:
        if hog is not None:
            hog.kill()
    recall: dict[str, dict[str, float]] = {}
    timed_vectors = vectors[args.warmup :]
    for key, found in results.items():
        ids = [[row[0] for row in rows] for rows in found]
        recall[key] = {
            "strict": measure.overlap_at_k(ids, truth),
            "ties": measure.recall_with_ties(ids, truth, corpus.vectors, timed_vectors),
        }
    out = {
        "measured_at": bench._now(),
        "database": args.database,
        "hog": args.hog,
        "loadavg": measure.load_average(),
        "latency": measure.latency_summary(recorder),
        "recall_at_20": recall,
    }
    bench.write_report(args.json, out)
    if args.drop:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("DROP INDEX IF EXISTS bench_split_half0, bench_split_half1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
