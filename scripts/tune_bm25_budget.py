"""The bounded BM25 arm's trade-off on a benchmark corpus: latency and overlap with exact BM25, per budget.

Uses the corpus and queries of ``scripts/bench.py`` (the database is built if missing). For each
``RAG_BM25_MAX_POSTINGS`` value it times the keyword arm (typical queries and queries of the 20 most
frequent terms) and the hybrid statement, and measures quality against the exact arm (0, measured
first): overlap of the top 20, the share of the exact top 20's BM25 score sum kept, and how often
the chunk a query was drawn from is returned. Writes JSON; ``--markdown`` prints a table::

    .venv/bin/python scripts/tune_bm25_budget.py --size 100000 --budgets 0,8000,12000,16000,20000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import server_url
from bench_lib import corpus as synth
from bench_lib import measure, retrievers, store

from rag_service.config import load_settings
from rag_service.db import bm25
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import SearchRequest, hybrid_search

ARMS = ("keyword", "keyword_frequent", "hybrid", "hybrid_frequent")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--budgets", default="0,8000,12000,16000,20000", help="comma-separated; 0 = exact")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--json", type=Path, default=Path("bench_out/bm25_budget.json"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--plot", type=Path, help="draw latency against overlap per budget into this PNG")
    parser.add_argument("--from-json", action="store_true", help="measure nothing: report from --json")
    parser.add_argument(
        "--completions", type=int, default=None, help="chunks completed per candidate (default: the service's)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        return report_outputs(args, json.loads(args.json.read_text()))
    budgets = sorted({int(b) for b in args.budgets.split(",")})  # 0 (exact, the reference) first
    if args.completions is not None:
        bm25.BOUNDED_COMPLETIONS_PER_CANDIDATE = args.completions
    settings = load_settings()
    url = server_url(settings)
    vocabulary = synth.load_vocabulary(args.dataset / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size, seed=args.seed)
    name = f"rag_bench_{store.size_label(args.size)}"
    store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    count = args.warmup + args.queries
    work, _ = measure.make_workload(engine, corpus, vocabulary.words, count=count, seed=args.seed)
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
    exact_scores: dict[str, list[float]] = {}
    completions = bm25.BOUNDED_COMPLETIONS_PER_CANDIDATE
    report: dict[str, Any] = {"size": args.size, "queries": args.queries, "completions": completions, "budgets": {}}
    for budget in budgets:
        row: dict[str, Any] = {}
        for arm in ARMS:
            found: list[list[int]] = []
            times: list[float] = []
            totals: list[float] = []  # the keyword arm: sum of the returned BM25 scores
            for i in tqdm(range(count), desc=f"{budget} {arm}", unit="q", leave=False):
                started = time.perf_counter()
                with database.transaction() as session:
                    hits = hybrid_search(session, request(arm, i, budget))
                if i >= args.warmup:
                    times.append((time.perf_counter() - started) * 1000.0)
                    found.append([h.chunk_id for h in hits])
                    totals.append(sum(h.keyword_score or 0.0 for h in hits))
            if budget == 0:
                exact[arm], exact_scores[arm] = found, totals
            sources = [src + 1 for src in work.queries.source_chunks[args.warmup : count]]
            row[arm] = {
                "source_hit_at_20": None if "frequent" in arm else round(measure.hit_rate(found, sources), 4),
                "p50_ms": round(float(np.percentile(times, 50)), 2),
                "p95_ms": round(float(np.percentile(times, 95)), 2),
                "overlap_at_20": round(measure.overlap_at_k(found, exact[arm]), 4) if arm in exact else None,
            }
            if arm.startswith("keyword") and arm in exact_scores:
                kept = [got / best for got, best in zip(totals, exact_scores[arm], strict=True) if best > 0]
                row[arm]["bm25_score_kept"] = round(float(np.mean(kept)), 4)
        report["budgets"][str(budget)] = row
        print(budget, json.dumps(row), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    return report_outputs(args, report)


def report_outputs(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Print the markdown table and draw the plot, as asked."""
    if args.markdown:
        print(markdown(report))
    if args.plot:
        plot(report, args.plot)
    return 0


def plot(report: dict[str, Any], path: Path) -> None:
    """p95 latency (x) against overlap with the exact top 20 (y), one line per arm, points per budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for arm in ARMS:
        points = sorted(
            ((int(b), row[arm]) for b, row in report["budgets"].items() if row[arm]["overlap_at_20"] is not None),
            key=lambda point: (point[0] == 0, point[0]),  # exact (0) is the largest budget
        )
        xs = [cell["p95_ms"] for _, cell in points]
        ys = [cell["overlap_at_20"] for _, cell in points]
        ax.plot(xs, ys, marker="o", label=arm.replace("_", " "))
        for (budget, _), x, y in zip(points, xs, ys, strict=True):
            ax.annotate(
                "exact" if budget == 0 else f"{budget:,}",
                (x, y),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )
    ax.axvline(20, color="grey", linestyle=":", linewidth=1)
    ax.axvline(30, color="grey", linestyle="--", linewidth=1)
    ax.text(20, 0.02, " hybrid target", fontsize=7, color="grey")
    ax.text(30, 0.02, " keyword target", fontsize=7, color="grey")
    ax.set_xlabel("p95 latency, ms")
    ax.set_ylabel("overlap with the exact top 20")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"BM25 posting budget at {report['size']:,} chunks: speed against agreement with exact BM25")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _quality(cell: dict[str, Any]) -> str:
    parts = [] if cell["overlap_at_20"] is None else [f"overlap {cell['overlap_at_20']:.3f}"]
    if cell.get("bm25_score_kept") is not None:
        parts.append(f"score kept {cell['bm25_score_kept']:.3f}")
    if cell.get("source_hit_at_20") is not None:
        parts.append(f"source hit {cell['source_hit_at_20']:.3f}")
    return ", ".join(parts)


def _with_budget(request: SearchRequest, budget: int) -> SearchRequest:
    return replace(request, bm25_max_postings=budget)


def markdown(report: dict[str, Any]) -> str:
    """A table: one row per budget, p50/p95 and overlap with exact BM25 per arm."""
    head = "| postings per query | " + " | ".join(f"{a}: p50 / p95 ms; quality" for a in ARMS)
    lines = [head + " |", "|---" * (len(ARMS) + 1) + "|"]
    for budget, row in report["budgets"].items():
        cells = [f"{row[a]['p50_ms']:.1f} / {row[a]['p95_ms']:.1f}; {_quality(row[a])}" for a in ARMS]
        lines.append(f"| {'all (exact)' if budget == '0' else budget} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
