#!/usr/bin/env python3
"""What the unknown-collection check (issue 23.4) costs a ``retrieve()``: the same questions with and without it.

Indexes the docs of DOCS_DIR into one collection of the database of the environment (embedded by
default), then asks each question of QUERIES twice per repeat, with the check and with it stubbed out,
in a fresh random order each time; prints the p50/p95 of the whole call for both, and the time of the
probe alone (``require_collection`` in its own read-only transaction).

    RAG_DATA_DIR=/tmp/ux-bench .venv/bin/python scripts/bench_collection_check.py \\
        ../shared/datasets/anthropic-docs-qa/docs ../shared/datasets/anthropic-docs-qa/queries.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path

import rag_service.service as service_module


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("docs", type=Path)
    parser.add_argument("queries", type=Path)
    parser.add_argument("--context", default="chatbot")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=int, default=50)
    args = parser.parse_args()
    questions = [json.loads(line)["text"] for line in args.queries.read_text().splitlines() if line.strip()]
    questions = questions[: args.limit]
    service = service_module.build_service()
    checked = service_module.require_collection
    try:
        report = service.index_paths([args.docs], collection="bench-check")
        assert report.ok, report.lines()
        for question in questions[:3]:
            service.retrieve(question, args.context, collection="bench-check")
        times: dict[str, list[float]] = {"with check": [], "without": []}
        rng = random.Random(23)
        for _ in range(args.repeat):
            for question in questions:
                order = list(times)
                rng.shuffle(order)
                for variant in order:
                    service_module.require_collection = checked if variant == "with check" else lambda s, c: None  # type: ignore[assignment]
                    started = time.perf_counter()
                    service.retrieve(question, args.context, collection="bench-check")
                    times[variant].append((time.perf_counter() - started) * 1000)
        service_module.require_collection = checked
        probes = []
        for _ in range(500):
            started = time.perf_counter()
            service.require_collection("bench-check")
            probes.append((time.perf_counter() - started) * 1000)
    finally:
        service_module.require_collection = checked
        service.close()
    print(f"load average {os.getloadavg()[0]:.2f}; {len(questions)} questions x {args.repeat}, preset {args.context}")
    for variant, values in times.items():
        print(f"retrieve {variant:>10}: p50 {_pct(values, 0.5):.2f} ms, p95 {_pct(values, 0.95):.2f} ms")
    print(f"probe alone (own transaction): p50 {statistics.median(probes):.3f} ms, p95 {_pct(probes, 0.95):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
