#!/usr/bin/env python3
"""One node at a large size: hybrid SQL and ``retrieve()`` p50/p95, index sizes and build times.

``scripts/bench.py`` also times the baselines (``ts_rank_cd`` over the 20 most frequent terms, bm25s,
LangChain), which at 1M chunks take seconds per query; this runs only our statements, with exact
numpy search for the HNSW recall. The database is built (or reused, or migrated forward) by
``bench_lib.store.ensure_loaded``, as in ``scripts/bench.py``.

    RAG_DATA_DIR=/work/bench-data .venv/bin/python scripts/bench_one_node.py --size 1000000

``--database`` times a database already loaded with the same corpus (``scripts/bench_bulk_load.py`` builds
``rag_bulk_1m_bulk`` in ~27 minutes, against ~65 for ``ensure_loaded``'s row path); ``--ef-search 100,200``
adds the vector arm at each fixed ``hnsw.ef_search``, timed and scored against exact search like the rest.
``retrieve()`` embeds the query with the default backend (ONNX int8), as a user's process does.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import time
from pathlib import Path

import bench
import psycopg
from bench_lib import corpus as synth
from bench_lib import measure, reads, real_text, retrievers, store
from sqlalchemy import Engine
from tqdm import tqdm

from rag_service.config import BUNDLED_MINILM, Preset, Settings, load_settings
from rag_service.db.admin import database_url
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import hybrid_search
from rag_service.db.search_request import ef_search_for
from rag_service.db.shared_memory import SharedMemory, read_shared_memory
from rag_service.embed import Embedder, embedder_for
from rag_service.service import UniversalRAGService

DATASETS = bench.REPO.parent / "shared" / "datasets"
TIMED = ("ours_vector", "ours_fulltext", "ours_hybrid", "ours_hybrid_rrf", "ours_retrieve")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "bench-one-node.json")
    parser.add_argument("--database", help="an existing database loaded with this corpus (default: built or reused)")
    parser.add_argument("--ef-search", default="", help="comma-separated fixed ef_search values for the vector arm")
    parser.add_argument("--prewarm", action="store_true", help="read what a search uses into shared_buffers first")
    parser.add_argument(
        "--corpus",
        choices=("synthetic", "real"),
        default="synthetic",
        help=(
            "real: the real-text chunks with realistic vectors of scripts/bench_bulk_load.py --corpus real (pass its "
            "--database), asked the datasets' real questions"
        ),
    )
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="LOAD")
    parser.add_argument(
        "--context-ab",
        action="store_true",
        help="also time the hybrid statement and retrieve() without the context BM25",
    )
    parser.add_argument(
        "--proximity-ab",
        action="store_true",
        help="also time the hybrid statement and retrieve() without term proximity (set RAG_PROXIMITY_WEIGHT)",
    )
    parser.add_argument(
        "--context-vector-ab",
        action="store_true",
        help="also time the hybrid statement and retrieve() without the context similarity",
    )
    parser.add_argument(
        "--parallel-ab",
        action="store_true",
        help="also time the hybrid statement and retrieve() with the arms one after the other (RAG_PARALLEL_ARMS_FROM 0)",
    )
    parser.add_argument(
        "--packed-ab",
        action="store_true",
        help="also time the keyword arm and the hybrid statement with the bounded arm instead of packed postings",
    )
    args = parser.parse_args()

    settings = load_settings()
    url = bench.server_url(settings)
    vocabulary = synth.load_vocabulary(bench.DEFAULT_SCIFACT / "corpus.jsonl")
    real = args.corpus == "real"
    corpus = real_text.benchmark_corpus(
        args.corpus, size=args.size, datasets=DATASETS, data_dir=settings.data_dir, vocabulary=vocabulary
    )
    if args.database:
        name, build = args.database, {"comment": store.database_comment(url, args.database)}
    else:
        name = f"rag_bench_{store.size_label(args.size)}"
        build = store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    embedder = embedder_for(BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models")
    if real:
        work = _real_workload(embedder, args.warmup + args.queries)
    else:
        work, _ = measure.make_workload(engine, corpus, vocabulary.words, count=args.warmup + args.queries, seed=42)
    service = UniversalRAGService(settings, database=database, embedder=embedder, reranker=None)
    with database.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    stages: list[dict[str, float]] = []
    everything = retrievers.ours(database, settings, preset, work, service, stages, collection_chunks=args.size)
    timed = {key: everything[key] for key in TIMED}
    # each signal's cost as a ratio in one run: the hybrid statement and retrieve() again with its weight 0
    for asked, weight, label in (
        (args.context_ab, "context_weight", "context"),
        (args.proximity_ab, "proximity_weight", "proximity"),
        (args.context_vector_ab, "context_vector_weight", "context_vector"),
        (args.parallel_ab, "parallel_arms_from", "parallel"),
    ):
        if asked:
            without_it = dataclasses.replace(settings, **{weight: 0.0})
            service_without = UniversalRAGService(without_it, database=database, embedder=embedder, reranker=None)
            others = retrievers.ours(
                database, without_it, preset, work, service_without, [], collection_chunks=args.size
            )
            timed[f"ours_hybrid_no_{label}"] = others["ours_hybrid"]
            timed[f"ours_retrieve_no_{label}"] = others["ours_retrieve"]
    if args.packed_ab:  # the bounded SQL arm against the packed lists' exact one, interleaved
        bounded = retrievers.ours(
            database, settings, preset, work, service, [], collection_chunks=args.size, packed=False
        )
        timed["ours_fulltext_bounded"] = bounded["ours_fulltext"]
        timed["ours_hybrid_bounded"] = bounded["ours_hybrid"]
    timed["numpy_exact"] = retrievers.numpy_exact(corpus, work)
    efs = [int(v) for v in args.ef_search.split(",") if v.strip()]
    for ef in efs:
        timed[f"vector_ef{ef}"] = _vector_at(database, settings, preset, work, ef)
    prewarmed = 0
    monitor = psycopg.connect(database_url(url, name).replace("+psycopg", ""), autocommit=True)
    if args.prewarm:
        monitor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        prewarmed = store.prewarm(monitor, store.hot_relations(monitor))
    cached_after_prewarm = reads.buffercache(monitor)
    bench.wait_for_quiet(args.wait_idle)
    gc.collect()
    gc.freeze()
    retouch_before = measure.memory_retouch_ms()
    load_before = measure.load_average()
    before = reads.snapshot(monitor)
    recorder, results, _ = measure.time_retrievers(timed, warmup=args.warmup, queries=args.queries, desc=name, seed=42)
    time.sleep(2.0)  # the backends' I/O counters reach the statistics when they idle, at most once a second
    during = reads.difference(before, reads.snapshot(monitor))
    cached_after_timing = reads.buffercache(monitor)
    monitor.close()
    timed_vectors = work.queries.vectors[args.warmup : args.warmup + args.queries]

    def with_ties(found: list[list[int]]) -> float:
        return measure.recall_with_ties(found, results["numpy_exact"], corpus.vectors, timed_vectors)

    out = {
        "measured_at": bench._now(),
        "chunks": args.size,
        "corpus": args.corpus,
        "loadavg_before": load_before,
        "loadavg_after": measure.load_average(),
        # the host's state (measure.memory_retouch_ms): 50 MB read again after 1 s idle, before and after the timing
        "memory_retouch_ms": [retouch_before, measure.memory_retouch_ms()],
        "build": build,
        "relation_sizes": store.relation_sizes(database_url(url, name)),
        "latency": measure.latency_summary(recorder),
        "retrieve_stages_ms": bench.stage_summary(stages[-args.queries :]),
        "hnsw_recall_at_20": measure.overlap_at_k(results["ours_vector"], results["numpy_exact"]),
        "ef_search_default": ef_search_for(args.size, base=settings.hnsw_ef_search, depth=preset.candidate_k),
        "recall_at_20_by_ef_search": {
            ef: measure.overlap_at_k(results[f"vector_ef{ef}"], results["numpy_exact"]) for ef in efs
        },
        # the same counting ties with the exact 20th as found (15% of the real 1M corpus's chunks are copies of another)
        "hnsw_recall_at_20_with_ties": with_ties(results["ours_vector"]),
        "recall_at_20_with_ties_by_ef_search": {ef: with_ties(results[f"vector_ef{ef}"]) for ef in efs},
        "exact_search_strict_recall_at_20_other_tie_break": measure.overlap_at_k(
            measure.exact_top_k_other_tie_break(corpus.vectors, timed_vectors, 20), results["numpy_exact"]
        ),
        "prewarmed_blocks": prewarmed,
        "reads_during_timing": during,
        "shared_buffers_mb_after_prewarm": cached_after_prewarm,
        "shared_buffers_mb_after_timing": cached_after_timing,
        "context_weight": settings.context_weight,
        "proximity_weight": settings.proximity_weight,
        "context_vector_weight": settings.context_vector_weight,
        "parallel_arms_from": settings.parallel_arms_from,
        # huge pages took up to 20% off the p95s at 1M (session 44): runs compare only with the same pages
        "shared_memory": dataclasses.asdict(_shared_memory(engine)),
    }
    if args.packed_ab:
        out["bounded_overlap_at_20_with_packed"] = {
            arm: measure.overlap_at_k(results[f"ours_{arm}_bounded"], results[f"ours_{arm}"])
            for arm in ("fulltext", "hybrid")
        }
        out["keyword_overlap_at_20_with_exact_sql"] = _exact_sql_overlap(service, preset, work, results, args)
    bench.write_report(args.json, out)
    service.close()
    return 0


def _exact_sql_overlap(
    service: UniversalRAGService,
    preset: Preset,
    work: retrievers.Workload,
    results: dict[str, list[list[int]]],
    args: argparse.Namespace,
) -> dict[str, float]:
    """The packed and the bounded keyword arms' top 20 against the SQL arm reading every posting (untimed: 0.3-0.9 s
    a question at 1M), over the timed questions."""
    exact_settings = dataclasses.replace(service.settings, bm25_max_postings=0)
    exact = retrievers.ours(
        service.db, exact_settings, preset, work, service, [], collection_chunks=args.size, packed=False
    )
    timed = range(args.warmup, args.warmup + args.queries)
    found = [exact["ours_fulltext"](i) for i in tqdm(timed, desc="exact SQL keyword arm")]
    return {arm: measure.overlap_at_k(results[arm], found) for arm in ("ours_fulltext", "ours_fulltext_bounded")}


def _shared_memory(engine: Engine) -> SharedMemory:
    with engine.connect() as connection:
        return read_shared_memory(connection)


def _real_workload(embedder: Embedder, count: int) -> retrievers.Workload:
    """``count`` real questions of the visible datasets, embedded by the default model (as ``retrieve`` does)."""
    texts = real_text.real_queries(DATASETS, per_set=count, seed=11)[:count]
    queries = synth.QuerySet(texts=texts, vectors=embedder.embed_documents(texts), source_chunks=[-1] * len(texts))
    return retrievers.Workload(queries=queries, frequent=queries)


def _vector_at(
    database: Database, settings: Settings, preset: Preset, work: retrievers.Workload, ef: int
) -> retrievers.RetrieverFn:
    """The vector arm alone with a fixed ``hnsw.ef_search`` (one transaction per query, as ``Retriever`` runs it)."""

    def search(i: int) -> list[int]:
        request = retrievers.search_request(
            settings, preset, work.queries.vectors[i], work.parts[i], vector_weight=1.0, keyword_weight=0.0
        )
        with database.transaction() as session:
            return [hit.chunk_id for hit in hybrid_search(session, dataclasses.replace(request, ef_search=ef))]

    return search


if __name__ == "__main__":
    raise SystemExit(main())
