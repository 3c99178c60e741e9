#!/usr/bin/env python
"""Bar chart of nDCG@10 on a documentation set: our configurations (eval_docs.py) beside the peers.

    scripts/plot_docs_eval.py bench_out/grid_final.json [--peers bench_out/peers_docs.json] --out docs/docs_quality.png

The peers file is the JSON of ``scripts/peers_docs.py`` (a list of rows with ``name`` and ``ndcg@10``
under ``rows``); without it only our configurations are drawn.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _rows(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    rows: list[dict[str, Any]] = data["rows"] if isinstance(data, dict) else data
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ours", type=Path)
    parser.add_argument("--peers", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("docs/docs_quality.png"))
    parser.add_argument("--title", default="ray-docs-qa: nDCG@10 over sections, first 10 results")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [(f"ours: {r['name']}", float(r["ndcg@10"]), "ours") for r in _rows(args.ours)]
    if args.peers is not None:
        bars += [(str(r["name"]), float(r["ndcg@10"]), "peer") for r in _rows(args.peers)]
    bars.sort(key=lambda b: b[1])
    colors = {"ours": "#2b6cb0", "peer": "#a0aec0"}
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(bars) + 1.2))
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color=[colors[b[2]] for b in bars])
    for y, (_, value, _) in enumerate(bars):
        ax.text(value + 0.003, y, f"{value:.3f}", va="center", fontsize=8)
    ax.set_xlabel("nDCG@10")
    ax.set_title(args.title, fontsize=10)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlim(0, max(b[1] for b in bars) * 1.15)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
