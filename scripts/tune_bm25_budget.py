"""The bounded BM25 arm's trade-off on a benchmark corpus: latency and overlap with exact BM25, per budget.

Uses the corpus and queries of ``scripts/bench.py`` (the database must exist: run the benchmark
once). For each ``RAG_BM25_MAX_POSTINGS`` value it times the keyword arm (typical queries and queries
of the 20 most frequent terms) and the hybrid statement, and measures how much of the exact top 20
each keeps. Writes JSON; ``--markdown`` also prints a table for ``docs/benchmarks.md``::

    .venv/bin/python scripts/tune_bm25_budget.py --size 100000 --budgets 0,2000,5000,10000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import server_url  # noqa: E402
from bench_lib import corpus as synth  # noqa: E402
from bench_lib import measure, retrievers, store  # noqa: E402
from rag_service.config import Settings  # noqa: E402
from rag_service.db.database import Database  # noqa: E402
from rag_service.db.presets import load_preset  # noqa: E402
from rag_service.db.search import SearchRequest, hybrid_search  # noqa: E402

ARMS = ("keyword", "keyword_frequent", "hybrid", "hybrid_frequent")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--budgets", default="0,1000,2000,5000,10000", help="comma-separated; 0 = exact")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--json", type=Path, default=Path("bench_out/bm25_budget.json"))
    parser.add_argument("--markdown", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    settings = Settings()
    url = server_url(settings)
    vocabulary = synth.load_vocabulary(args.dataset / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size, seed=args.seed)
    name = f"rag_bench_{store.size_label(args.size)}"
    store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    count = args.warmup + args.queries
    terms = measure.frequent_terms(engine, vocabulary.words)
    work = retrievers.Workload(
        queries=synth.make_queries(corpus, count=count, seed=args.seed + 1),
        frequent=synth.make_frequent_queries([t["word"] for t in terms], corpus, count=count, seed=args.seed + 2),
    )
    with database.transaction() as session:
        preset = load_preset(session, "workflow")

    def request(arm: str, i: int, budget: int) -> SearchRequest:
        frequent = arm.endswith("_frequent")
        parts = (work.frequent_parts if frequent else work.parts)[i]
        vectors = (work.frequent if frequent else work.queries).vectors
        if arm.startswith("keyword"):
            base = retrievers.search_request(settings, preset, None, parts, vector_weight=0.0, keyword_weight=1.0)
        else:
            base = retrievers.search_request(settings, preset, vectors[i], parts)
        return _with_budget(base, budget)

    exact: dict[str, list[list[int]]] = {}
    report: dict[str, Any] = {"size": args.size, "queries": args.queries, "budgets": {}}
    for budget in budgets:
        row: dict[str, Any] = {}
        for arm in ARMS:
            found, times = [], []
            for i in tqdm(range(count), desc=f"{budget} {arm}", unit="q", leave=False):
                started = time.perf_counter()
                with database.transaction() as session:
                    ids = [h.chunk_id for h in hybrid_search(session, request(arm, i, budget))]
                if i >= args.warmup:
                    times.append((time.perf_counter() - started) * 1000.0)
                    found.append(ids)
            if budget == 0:
                exact[arm] = found
            row[arm] = {
                "p50_ms": round(float(np.percentile(times, 50)), 2),
                "p95_ms": round(float(np.percentile(times, 95)), 2),
                "overlap_at_20": round(measure.overlap_at_k(found, exact[arm]), 4) if arm in exact else None,
            }
        report["budgets"][str(budget)] = row
        print(budget, json.dumps(row), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    if args.markdown:
        print(markdown(report))
    return 0


def _with_budget(request: SearchRequest, budget: int) -> SearchRequest:
    from dataclasses import replace

    return replace(request, bm25_max_postings=budget)


def markdown(report: dict[str, Any]) -> str:
    """A table: one row per budget, p50/p95 and overlap with exact BM25 per arm."""
    head = "| postings per lexeme | " + " | ".join(f"{a} p50 / p95 ms (overlap@20)" for a in ARMS) + " |"
    lines = [head, "|---" * (len(ARMS) + 1) + "|"]
    for budget, row in report["budgets"].items():
        cells = [
            f"{row[a]['p50_ms']:.1f} / {row[a]['p95_ms']:.1f} ({row[a]['overlap_at_20']:.3f})" for a in ARMS
        ]
        lines.append(f"| {'all (exact)' if budget == '0' else budget} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
