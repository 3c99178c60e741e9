#!/usr/bin/env python3
"""Choose the fusion defaults on a BEIR *train* split (never the test split).

Sweeps keyword scorer, arm weights, rrf_k, fusion method and candidate depth over every train query
(each query embedded once), prints nDCG@10 / Recall@100 per setting and writes a markdown table.

    .venv/bin/python scripts/tune_fusion.py ../shared/datasets/scifact --split train --out bench_out/tune.md
"""

from __future__ import annotations

import argparse
import itertools
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


def grid(quick: bool) -> list[dict[str, Any]]:
    """The settings to try; each is a set of preset overrides."""
    weights = [(0.5, 0.5), (0.6, 0.4), (0.7, 0.3), (0.8, 0.2)]
    configs: list[dict[str, Any]] = [{"vector_weight": 1.0, "keyword_weight": 0.0}]
    for scorer in ("bm25", "ts_rank_cd"):
        configs.append({"vector_weight": 0.0, "keyword_weight": 1.0, "keyword_scorer": scorer})
        for (vw, kw), rrf_k in itertools.product(weights, (20, 60) if not quick else (60,)):
            configs.append({"keyword_scorer": scorer, "vector_weight": vw, "keyword_weight": kw, "rrf_k": rrf_k})
        for vw, kw in weights:
            configs.append(
                {"keyword_scorer": scorer, "vector_weight": vw, "keyword_weight": kw, "fusion_method": "linear"}
            )
    return configs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--split", default="train")
    parser.add_argument("--depth", type=int, default=300)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("bench_out/tune.md"))
    args = parser.parse_args()
    if args.split == "test":
        print("error: tune on a train or dev split; the test split is for reporting", file=sys.stderr)
        return 2

    settings = load_settings()
    engine = open_engine(settings)
    migrate.upgrade(engine)
    embedder = CachedQueryEmbedder(SentenceTransformerEmbedder())
    service = UniversalRAGService(settings, database=Database(engine), embedder=embedder, reranker=None)
    dataset = load_beir(args.dataset_dir, split=args.split)
    collection = collection_for(args.dataset_dir)
    ensure_indexed(service, dataset, collection=collection, strategy="recursive", progress=True)

    rows = []
    for overrides in grid(args.quick):
        config = EvalConfig(
            context="search", rerank=False, depth=args.depth, overrides={**overrides, "expand_query": False}
        )
        result = run_queries(
            service, dataset, config, collection=collection, name=args.dataset_dir.name, progress=False
        )
        rows.append((overrides, result.metrics, result.latency["retrieval"]["p95"]))
        print(json.dumps({**overrides, **{k: round(v, 4) for k, v in result.metrics.items()}}), flush=True)

    rows.sort(key=lambda r: -r[1]["ndcg@10"])
    lines = [
        f"| setting ({args.split} split, {len(dataset.queries)} queries, depth {args.depth}) "
        "| nDCG@10 | Recall@100 | SQL p95 ms |",
        "|---|---|---|---|",
    ]
    for overrides, metrics, p95 in rows:
        label = ", ".join(f"{k}={v}" for k, v in overrides.items())
        lines.append(f"| {label} | {metrics['ndcg@10']:.4f} | {metrics['recall@100']:.4f} | {p95:.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    service.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
