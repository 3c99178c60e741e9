#!/usr/bin/env python3
"""The same questions against two collections, interleaved: a fair latency comparison on a noisy machine.

For ablations that need two indexes of one corpus (e.g. ``RAG_KEYWORDS_IN_BM25`` off and on, issue 17):
each question of QUERIES (a ``queries.jsonl``) is asked of both collections in a fresh random order,
``--repeat`` times, through ``retrieve()`` with the preset and overrides given, and the SQL time
(``metrics.retrieval_time_ms``) and the whole call's time are summarised per collection.

    RAG_DATA_DIR=... .venv/bin/python scripts/bench_collections_latency.py \\
        ../shared/datasets/ray-docs-qa/queries.jsonl docs-ray-off docs-ray-eh --context workflow
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("queries", type=Path)
    parser.add_argument("collections", nargs=2)
    parser.add_argument("--context", default="workflow")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--set", action="append", default=[], help="key=value override (JSON value)")
    args = parser.parse_args()
    overrides = {"rerank_enabled": False}
    for item in args.set:
        key, _, raw = item.partition("=")
        overrides[key] = json.loads(raw)

    from rag_service.service import build_service

    questions = [json.loads(line)["text"] for line in args.queries.read_text().splitlines() if line.strip()]
    questions = questions[: args.limit] if args.limit else questions
    service = build_service()
    sql: dict[str, list[float]] = {c: [] for c in args.collections}
    total: dict[str, list[float]] = {c: [] for c in args.collections}
    rng = random.Random(17)
    try:
        for question in questions[:3]:  # warm-up: model load, caches
            for collection in args.collections:
                service.retrieve(question, args.context, collection=collection, **overrides)
        for _ in range(args.repeat):
            for question in questions:
                order = list(args.collections)
                rng.shuffle(order)
                for collection in order:
                    m = service.retrieve(question, args.context, collection=collection, **overrides).metrics
                    sql[collection].append(m.retrieval_time_ms)
                    total[collection].append(m.total_time_ms)
    finally:
        service.close()
    print(f"{len(questions)} questions x {args.repeat}, context {args.context}, overrides {overrides}")
    print("| collection | SQL p50 / p95 ms | retrieve() p50 / p95 ms |")
    print("|---|---:|---:|")
    for collection in args.collections:
        s, t = sql[collection], total[collection]
        print(
            f"| {collection} | {statistics.median(s):.1f} / {_pct(s, 0.95):.1f} "
            f"| {statistics.median(t):.1f} / {_pct(t, 0.95):.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
