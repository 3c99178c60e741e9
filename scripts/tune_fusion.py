#!/usr/bin/env python3
"""Choose BM25 and fusion defaults on a BEIR *train* split (never the test split).

Stage 1 sweeps BM25 k1/b with the keyword arm alone; stage 2 sweeps arm weights, rrf_k and the
fusion method with the best k1/b. Every train query is embedded once (cached). Results are printed
as JSON lines and written as a markdown table.

    .venv/bin/python scripts/tune_fusion.py ../shared/datasets/scifact --split train --out bench_out/tune.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from rag_service.config import load_settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import open_engine
from rag_service.embed import CachedQueryEmbedder, SentenceTransformerEmbedder
from rag_service.evaluation.beir import load_beir
from rag_service.evaluation.runner import EvalConfig, collection_for, ensure_indexed, run_queries
from rag_service.service import UniversalRAGService

BM25_GRID = [(0.9, 0.4), (1.2, 0.75), (1.2, 0.5), (0.9, 0.6), (1.5, 0.75), (0.6, 0.3)]
WEIGHTS = [(0.5, 0.5), (0.6, 0.4), (0.7, 0.3), (0.8, 0.2)]


def fusion_grid() -> list[dict[str, Any]]:
    """Stage 2 settings (preset overrides)."""
    grid: list[dict[str, Any]] = [{"vector_weight": 1.0, "keyword_weight": 0.0}]
    for vw, kw in WEIGHTS:
        for rrf_k in (20, 60):
            grid.append({"vector_weight": vw, "keyword_weight": kw, "rrf_k": rrf_k})
        grid.append({"vector_weight": vw, "keyword_weight": kw, "fusion_method": "linear"})
    grid.append({"vector_weight": 0.7, "keyword_weight": 0.3, "rrf_k": 60, "expand_query": True})
    return grid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--split", default="train")
    parser.add_argument("--depth", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("bench_out/tune.md"))
    args = parser.parse_args()
    if args.split == "test":
        print("error: tune on a train or dev split; the test split is for reporting", file=sys.stderr)
        return 2

    base = load_settings()
    engine = open_engine(base)
    migrate.upgrade(engine)
    embedder = CachedQueryEmbedder(SentenceTransformerEmbedder())
    dataset = load_beir(args.dataset_dir, split=args.split)
    collection = collection_for(args.dataset_dir)
    rows: list[tuple[str, dict[str, Any], dict[str, float], float]] = []

    def evaluate(stage: str, k1: float, b: float, overrides: dict[str, Any]) -> dict[str, float]:
        settings = dataclasses.replace(base, bm25_k1=k1, bm25_b=b)
        service = UniversalRAGService(settings, database=Database(engine), embedder=embedder, reranker=None)
        config = EvalConfig(
            context="search", rerank=False, depth=args.depth, overrides={"expand_query": False, **overrides}
        )
        result = run_queries(
            service, dataset, config, collection=collection, name=args.dataset_dir.name, progress=False
        )
        setting = {"k1": k1, "b": b, **overrides}
        rows.append((stage, setting, result.metrics, result.latency["retrieval"]["p95"]))
        print(
            json.dumps({"stage": stage, **setting, **{k: round(v, 4) for k, v in result.metrics.items()}}), flush=True
        )
        return result.metrics

    first = UniversalRAGService(base, database=Database(engine), embedder=embedder, reranker=None)
    ensure_indexed(first, dataset, collection=collection, strategy="recursive", progress=True)

    keyword_only = {"vector_weight": 0.0, "keyword_weight": 1.0}
    scores = {kb: evaluate("bm25", *kb, keyword_only)["ndcg@10"] for kb in BM25_GRID}
    k1, b = max(scores, key=lambda kb: scores[kb])
    evaluate("bm25", k1, b, {**keyword_only, "keyword_scorer": "ts_rank_cd"})
    for overrides in fusion_grid():
        evaluate("fusion", k1, b, overrides)

    lines = [
        f"Tuned on the {args.split} split ({len(dataset.queries)} queries, depth {args.depth}, no reranker); "
        f"best BM25 k1={k1}, b={b}.",
        "",
        "| stage | setting | nDCG@10 | Recall@100 | SQL p95 ms |",
        "|---|---|---|---|---|",
    ]
    for stage, setting, metrics, p95 in sorted(rows, key=lambda r: (r[0], -r[2]["ndcg@10"])):
        label = ", ".join(f"{key}={value}" for key, value in setting.items())
        lines.append(f"| {stage} | {label} | {metrics['ndcg@10']:.4f} | {metrics['recall@100']:.4f} | {p95:.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
