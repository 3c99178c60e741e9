#!/usr/bin/env python3
"""One node at a large size: hybrid SQL and ``retrieve()`` p50/p95, index sizes and build times.

``scripts/bench.py`` also times the baselines (``ts_rank_cd`` over the 20 most frequent terms, bm25s,
LangChain), which at 1M chunks take seconds per query; this runs only our statements, with exact
numpy search for the HNSW recall. The database is built (or reused, or migrated forward) by
``bench_lib.store.ensure_loaded``, as in ``scripts/bench.py``.

    RAG_DATA_DIR=/work/bench-data .venv/bin/python scripts/bench_one_node.py --size 1000000
"""

from __future__ import annotations

import argparse
import gc
import json
from pathlib import Path

import bench
from bench_lib import corpus as synth
from bench_lib import measure, retrievers, store

from rag_service.config import load_settings
from rag_service.db.admin import database_url
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.embed import SentenceTransformerEmbedder
from rag_service.service import UniversalRAGService

TIMED = ("ours_vector", "ours_fulltext", "ours_hybrid", "ours_hybrid_rrf", "ours_retrieve")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "bench-one-node.json")
    args = parser.parse_args()

    settings = load_settings()
    url = bench.server_url(settings)
    vocabulary = synth.load_vocabulary(bench.DEFAULT_SCIFACT / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size, seed=42)
    name = f"rag_bench_{store.size_label(args.size)}"
    build = store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    work, _ = measure.make_workload(engine, corpus, vocabulary.words, count=args.warmup + args.queries, seed=42)
    service = UniversalRAGService(settings, database=database, embedder=SentenceTransformerEmbedder(), reranker=None)
    with database.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    stages: list[dict[str, float]] = []
    everything = retrievers.ours(database, settings, preset, work, service, stages)
    timed = {key: everything[key] for key in TIMED}
    timed["numpy_exact"] = retrievers.numpy_exact(corpus, work)
    gc.collect()
    gc.freeze()
    load_before = measure.load_average()
    recorder, results, _ = measure.time_retrievers(timed, warmup=args.warmup, queries=args.queries, desc=name, seed=42)
    out = {
        "measured_at": bench._now(),
        "chunks": args.size,
        "loadavg_before": load_before,
        "loadavg_after": measure.load_average(),
        "build": build,
        "relation_sizes": store.relation_sizes(database_url(url, name)),
        "latency": measure.latency_summary(recorder),
        "retrieve_stages_ms": bench.stage_summary(stages[-args.queries :]),
        "hnsw_recall_at_20": measure.overlap_at_k(results["ours_vector"], results["numpy_exact"]),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    service.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
