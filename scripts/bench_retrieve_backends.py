"""``retrieve()`` at 100k chunks with the query embedded by ONNX Runtime against torch, interleaved (issue 24).

Uses the synthetic corpus database of ``scripts/bench.py`` (built there, reused here: run bench.py once
at that size first) and times, per query, in a random order at each step: ``retrieve()`` without
rerank with each backend's embedder, the query embedding alone with each, and the hybrid statement
alone. A short run (no baselines), so it can be taken when the machine is quiet.

    RAG_DATA_DIR=bench_out/bench-data .venv/bin/python scripts/bench_retrieve_backends.py --wait-idle 0.8
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

import psycopg

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench import DEFAULT_SCIFACT, PRESET, server_url, stage_summary, wait_for_quiet
from bench_lib import corpus as synth
from bench_lib import measure, retrievers, store

from rag_service.config import BUNDLED_MINILM, load_settings
from rag_service.db.admin import database_url
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.embed import SentenceTransformerEmbedder, embedder_for
from rag_service.service import UniversalRAGService


def main(argv: list[str] | None = None) -> int:
    """Time both backends' ``retrieve()`` on the stored synthetic corpus; print and write the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="LOAD")
    parser.add_argument("--json", type=Path, default=Path("bench_out/retrieve_backends.json"))
    parser.add_argument(
        "--prewarm", action="store_true", help="read what a search uses into shared_buffers first (pg_prewarm)"
    )
    parser.add_argument(
        "--onnx-only",
        action="store_true",
        help="time the ONNX backend alone: torch's threads in the same process take CPU from Postgres",
    )
    args = parser.parse_args(argv)

    settings = load_settings()
    url = server_url(settings)
    vocabulary = synth.load_vocabulary(DEFAULT_SCIFACT / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size, seed=args.seed)
    name = f"rag_bench_{store.size_label(args.size)}"
    if store.database_comment(url, name) is None:
        print(f"no benchmark database {name}: run scripts/bench.py --sizes {args.size} first", file=sys.stderr)
        return 1
    store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    work, _ = measure.make_workload(engine, corpus, vocabulary.words, count=args.warmup + args.queries, seed=args.seed)
    with database.transaction() as session:
        preset = load_preset(session, PRESET)

    onnx = embedder_for(
        BUNDLED_MINILM, batch_size=64, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models"
    )
    services = {"onnx": UniversalRAGService(settings, database=database, embedder=onnx, reranker=None)}
    if not args.onnx_only:
        torch = SentenceTransformerEmbedder(batch_size=64)
        services["torch"] = UniversalRAGService(settings, database=database, embedder=torch, reranker=None)
    stages: dict[str, list[dict[str, float]]] = {key: [] for key in services}
    texts = work.queries.texts
    fns: dict[str, retrievers.RetrieverFn] = {
        f"retrieve_{key}": retrievers.retrieve_fn(service, preset, work, stages[key])
        for key, service in services.items()
    }
    fns["embed_onnx"] = lambda i: [len(onnx.embed_query(texts[i]))]
    if not args.onnx_only:
        fns["embed_torch"] = lambda i: [len(torch.embed_query(texts[i]))]
    fns["hybrid_sql"] = retrievers.ours(database, settings, preset, work, services["onnx"], [])["ours_hybrid"]

    prewarmed = 0
    if args.prewarm:
        with psycopg.connect(database_url(url, name).replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            prewarmed = store.prewarm(conn)
    wait_for_quiet(args.wait_idle)
    gc.collect()
    gc.freeze()
    load_before = measure.load_average()
    recorder, _, _ = measure.time_retrievers(
        fns, warmup=args.warmup, queries=args.queries, desc=store.size_label(args.size), seed=args.seed
    )
    result = {
        "chunks": args.size,
        "backend": settings.embedding_backend,
        "prewarmed_blocks": prewarmed,
        "loadavg_before": load_before,
        "loadavg_after": measure.load_average(),
        "latency": measure.latency_summary(recorder, digits=3),
        "retrieve_stages_ms": {key: stage_summary(s[-args.queries :]) for key, s in stages.items()},
    }
    for service in services.values():
        service.close()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
