#!/usr/bin/env python
"""Several retrieval configurations on one documentation set, side by side (one index, one process).

    scripts/eval_docs.py ../shared/datasets/ray-docs-qa                      # the standard grid
    scripts/eval_docs.py DIR --config "deep: candidate_k=50" --config "rrf: fusion_method=rrf"

Each ``--config`` is ``name: key=value, key=value`` (preset overrides, values parsed as JSON; ``context``
picks the preset, default ``workflow``; ``sibling_weight`` and ``children_per_section`` set the stages'
constants of the same name for that configuration, for ablations). The results go to a JSON file (``--out``) and a markdown table
on stdout: nDCG@10, Recall@10, MRR@10, results and tokens per query, retrieve() p50/p95.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import rag_service.retrieve.parents as parents_stage
import rag_service.retrieve.retriever as retriever_stage
from rag_service.evaluation.docrun import docset_collection, index_docset, run_docset
from rag_service.evaluation.docset import load_docset
from rag_service.evaluation.runner import EvalConfig
from rag_service.service import build_service

DEFAULT_SIBLING_WEIGHT = parents_stage.SIBLING_WEIGHT
DEFAULT_CHILDREN = retriever_stage.CHILDREN_PER_SECTION
PRESETS = ("workflow", "chatbot", "agent", "context_engineering", "search")
STANDARD = [
    *(f"{p}: context={json.dumps(p)}" for p in PRESETS),
    *(f"{p}, no parents: context={json.dumps(p)}, return_parents=false" for p in PRESETS),
    "workflow, vector arm, no parents: vector_weight=1, keyword_weight=0, return_parents=false",
    "workflow, BM25 arm, no parents: vector_weight=0, keyword_weight=1, return_parents=false",
    "workflow, vector arm: vector_weight=1, keyword_weight=0",
    "workflow, BM25 arm: vector_weight=0, keyword_weight=1",
]


def parse_config(spec: str) -> tuple[str, str, dict[str, Any]]:
    """``"name: k=v, k=v"`` -> (name, context, overrides)."""
    name, _, body = spec.partition(":")
    overrides: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, _, raw = item.partition("=")
        try:
            overrides[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key.strip()] = raw.strip()
    context = str(overrides.pop("context", "workflow"))
    return name.strip(), context, overrides


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--config", action="append", default=[], help="name: key=value, ... (repeatable)")
    parser.add_argument("--collection", default=None)
    parser.add_argument("--out", type=Path, default=Path("bench_out/eval_docs.json"))
    parser.add_argument("--rerank", action="store_true", help="keep the reranker on (off by default)")
    args = parser.parse_args()

    docset = load_docset(args.dataset_dir)
    collection = args.collection or docset_collection(args.dataset_dir)
    service = build_service()
    rows: list[dict[str, Any]] = []
    try:
        report = index_docset(service, docset, collection=collection, strategy=None, progress=True)
        if not report.ok:
            print("\n".join(report.lines()), file=sys.stderr)
            return 1
        for spec in args.config or STANDARD:
            name, context, overrides = parse_config(spec)
            # ablation knobs, module constants of the stages (restored to the defaults for every config)
            parents_stage.SIBLING_WEIGHT = float(overrides.pop("sibling_weight", DEFAULT_SIBLING_WEIGHT))
            retriever_stage.CHILDREN_PER_SECTION = int(overrides.pop("children_per_section", DEFAULT_CHILDREN))
            config = EvalConfig(context=context, rerank=args.rerank, depth=None, strategy=None, overrides=overrides)
            started = time.perf_counter()
            result = run_docset(service, docset, config, collection=collection, name=name, progress=False)
            row = {
                "name": name,
                "context": context,
                "overrides": overrides,
                **result.metrics,
                **result.stats,
                "p50_ms": result.latency["total"]["p50"],
                "p95_ms": result.latency["total"]["p95"],
                "seconds": time.perf_counter() - started,
            }
            rows.append(row)
            print(
                f"{name:<45} ndcg@10 {row['ndcg@10']:.4f}  recall@10 {row['recall@10']:.4f}  "
                f"mrr@10 {row['mrr@10']:.4f}  results {row['results per query']:.1f}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        service.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"dataset": str(args.dataset_dir), "collection": collection, "rows": rows}, indent=2)
    )
    print("| configuration | nDCG@10 | Recall@10 | MRR@10 | results/q | tokens/q | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {r['ndcg@10']:.3f} | {r['recall@10']:.3f} | {r['mrr@10']:.3f} | "
            f"{r['results per query']:.1f} | {r['tokens per query']:.0f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
