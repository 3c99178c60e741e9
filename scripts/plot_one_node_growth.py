#!/usr/bin/env python3
"""Plot p50/p95 of each arm, the hybrid and ``retrieve()`` against the collection size (issue 27 point 4).

Reads the JSON files ``scripts/bench_one_node.py --json`` wrote, one per size, and prints the markdown table;
``--builds`` adds each size's bulk load time from ``scripts/bench_bulk_load.py``'s output.

    .venv/bin/python scripts/plot_one_node_growth.py bench_out/one_node_{10k,100k,300k,1m}.json --out docs/one_node_growth.png

``--corpus real`` labels runs of ``bench_one_node.py --corpus real`` (real text, realistic vectors).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SERIES = (
    ("ours_vector", "vector arm (HNSW)"),
    ("ours_fulltext", "keyword arm (BM25 as the service runs it)"),
    ("ours_hybrid", "hybrid SQL"),
    ("ours_retrieve", "retrieve(), no rerank"),
)
#: drawn for the runs that timed them (``bench_one_node.py --packed-ab``)
BOUNDED = (("ours_fulltext_bounded", "keyword arm, budget 6,000 (not exact)"),)


def _build_time(run: dict[str, Any], builds: dict[int, float]) -> str:
    """The bulk load's duration of a collection of this size (``--builds``), else blank."""
    seconds = builds.get(run["chunks"])
    return "" if seconds is None else f"{seconds / 60:.1f} min" if seconds >= 600 else f"{seconds:.0f} s"


def _bulk_load(path: Path) -> dict[str, Any]:
    """The JSON ``scripts/bench_bulk_load.py`` printed last (its output or a log of it, progress bars first)."""
    text = path.read_text()
    loaded: dict[str, Any] = json.loads(text[text.rindex("\n{\n") + 1 : text.rindex("}") + 1])
    return loaded


def _plot_builds(axis: Any, builds: dict[int, float]) -> None:
    """The bulk first index's minutes by size, against issue 27's 25 minutes at 1M."""
    sizes = sorted(builds)
    axis.plot(sizes, [builds[n] / 60 for n in sizes], marker="o", color="tab:purple", label="bulk first index")
    axis.axhline(25, color="tab:red", ls=":", label="25 min (issue 27, 1M)")
    axis.set_xscale("log")
    axis.set_xlabel("chunks loaded (precomputed vectors)")
    axis.set_ylabel("minutes, end to end (indexes, contexts, packing)")
    axis.set_title("Bulk first index by size")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/one_node_growth.png"))
    parser.add_argument("--corpus", choices=("synthetic", "real"), default="synthetic")
    parser.add_argument("--builds", nargs="*", type=Path, default=[], help="bench_bulk_load.py outputs (or logs)")
    args = parser.parse_args()
    builds = {load["chunks"]: load["total_s"] for load in map(_bulk_load, args.builds)}
    runs = sorted((json.loads(f.read_text()) for f in args.files), key=lambda r: r["chunks"])
    figure, axes = plt.subplots(1, 2 if builds else 1, figsize=(13 if builds else 8, 5), squeeze=False)
    axis = axes[0][0]
    for key, label in SERIES + BOUNDED:
        timed = [r for r in runs if key in r["latency"]]
        if not timed:
            continue
        at = [r["chunks"] for r in timed]
        line = axis.plot(at, [r["latency"][key]["p50"] for r in timed], marker="o", label=f"{label} p50")
        axis.plot(at, [r["latency"][key]["p95"] for r in timed], marker="x", ls="--", color=line[0].get_color())
    axis.set_xscale("log")
    axis.set_yscale("log")
    corpus = "synthetic corpus" if args.corpus == "synthetic" else "real text, realistic vectors"
    axis.set_xlabel(f"chunks in the collection ({corpus}, one node, 2 cores)")
    axis.set_ylabel("ms (solid p50, dashed p95)")
    axis.set_title("Latency by collection size (ef_search grows with the size)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    if builds:
        _plot_builds(axes[0][1], builds)
    figure.tight_layout()
    figure.savefig(args.out, dpi=110)
    print(
        "| chunks | ef_search | vector p50 / p95 | keyword | hybrid | retrieve() | HNSW recall@20 | keyword overlap@20 "
        "with exact BM25 (budget's) | table + indexes | HNSW | postings | packed lists | database | bulk load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        cells = [f"{r['latency'][k]['p50']:.1f} / {r['latency'][k]['p95']:.1f}" for k, _ in SERIES]
        sizes_ = r["relation_sizes"]
        exact = r.get("keyword_overlap_at_20_with_exact_sql", {})
        overlap = f"{exact['ours_fulltext']:.2f} ({exact['ours_fulltext_bounded']:.2f})" if exact else ""
        print(
            f"| {r['chunks']:,} | {r.get('ef_search_default', '')} | {' | '.join(cells)} | {r['hnsw_recall_at_20']:.3f} "
            f"| {overlap} | {sizes_['document_chunks_total']} | {sizes_['hnsw_index']} "
            f"| {sizes_.get('postings_total', '')} | {sizes_.get('packed_lists', '')} "
            f"| {sizes_.get('database_total', '')} | {_build_time(r, builds)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
