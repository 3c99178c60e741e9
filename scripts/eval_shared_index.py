#!/usr/bin/env python
"""A small documentation collection in a big shared HNSW index: nDCG@10 per setting (issue 23, 0b).

    RAG_DATA_DIR=bench_out/shared_index_db scripts/eval_shared_index.py ../shared/datasets/anthropic-docs-qa

1. indexes the docs set into its collection (``docs-<name>``) and evaluates it alone;
2. adds copies of it made in SQL until the other collections hold ``--others`` chunks: one exact
   copy, the rest with uniform noise on every vector component (near-identical documents, as in
   documentation versions or one handbook per tenant), then ``ANALYZE``;
3. evaluates the collection again under each variant of the vector search settings.

Each evaluation asks every question through ``retrieve()`` as ``rag eval`` does for docs sets
(``rag_service.evaluation.docrun``): nDCG@10 over sections, retrieve() p50/p95 and the retrieval
stage's p50. Configurations: the default preset (hybrid) and the vector arm alone. Re-running
reuses the indexed collection and the copies. A markdown table goes to stdout, JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lib.copies import copy_collection
from sqlalchemy import text

from rag_service.config import load_settings
from rag_service.evaluation.docrun import docset_collection, index_docset, run_docset
from rag_service.evaluation.docset import load_docset
from rag_service.evaluation.runner import EvalConfig
from rag_service.service import UniversalRAGService, build_service

CONFIGS = {
    "hybrid (workflow)": {},
    "vector arm": {"vector_weight": 1.0, "keyword_weight": 0.0},
}
#: name -> settings: the HNSW index at several ef_search values, and exact search (the default)
VARIANTS = {
    "HNSW, ef_search 100": {"exact_search_below": 0},
    "HNSW, ef_search 400": {"exact_search_below": 0, "hnsw_ef_search": 400},
    "HNSW, ef_search 1000": {"exact_search_below": 0, "hnsw_ef_search": 1000},
    "exact below 3k chunks (default)": {},
}


def evaluate(service: UniversalRAGService, docset: Any, collection: str, phase: str, variant: str) -> list[dict]:
    rows = []
    for name, overrides in CONFIGS.items():
        config = EvalConfig(context="workflow", rerank=False, depth=None, strategy=None, overrides=dict(overrides))
        result = run_docset(service, docset, config, collection=collection, name=name, progress=False)
        row = {
            "phase": phase,
            "variant": variant,
            "config": name,
            "ndcg@10": result.metrics["ndcg@10"],
            "p50_ms": result.latency["total"]["p50"],
            "p95_ms": result.latency["total"]["p95"],
            "retrieval_p50_ms": result.latency["retrieval"]["p50"],
        }
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def chunk_counts(service: UniversalRAGService) -> dict[str, int]:
    with service.db.transaction() as session:
        rows = session.execute(text("SELECT collection, chunk_count FROM collection_stats WHERE chunk_count > 0"))
        return {str(c): int(n) for c, n in rows}


def fill(service: UniversalRAGService, collection: str, others: int, noise: float) -> None:
    """Copies of ``collection`` until the other collections hold at least ``others`` chunks."""
    counts = chunk_counts(service)
    size = counts[collection]
    i = 0
    while sum(n for c, n in counts.items() if c != collection) < others:
        target = f"{collection}-copy{i:03d}"
        if target not in counts:
            with service.db.transaction() as session:
                # copy 0 exact; then noise of 1 to 4 times ``noise`` in turn
                copy_collection(session, source=collection, target=target, noise=noise * (i % 4 + 1) if i else 0.0)
            counts[target] = size
            print(f"copied {target} ({sum(counts.values())} chunks in all)", file=sys.stderr, flush=True)
        i += 1
    with service.db.transaction() as session:
        session.execute(text("ANALYZE documents, document_chunks, chunk_terms, lexeme_stats, collection_stats"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--others", type=int, default=50_000, help="chunks in the other collections")
    parser.add_argument("--noise", type=float, default=0.004, help="uniform noise amplitude per component")
    parser.add_argument("--out", type=Path, default=Path("bench_out/eval_shared_index.json"))
    args = parser.parse_args()
    docset = load_docset(args.dataset_dir)
    collection = docset_collection(args.dataset_dir)
    base = load_settings()
    rows: list[dict[str, Any]] = []
    service = build_service(base)
    try:
        report = index_docset(service, docset, collection=collection, strategy=None, progress=False)
        if not report.ok:
            print("\n".join(report.lines()), file=sys.stderr)
            return 1
        alone = len(chunk_counts(service)) == 1
    finally:
        service.close()
    phases = (["alone"] if alone else []) + ["beside copies"]
    for phase in phases:
        if phase == "beside copies":
            service = build_service(base)
            try:
                fill(service, collection, args.others, args.noise)
                counts = chunk_counts(service)
            finally:
                service.close()
            print(f"{collection}: {counts[collection]} chunks beside {sum(counts.values()) - counts[collection]}")
        for variant, changes in VARIANTS.items():
            service = build_service(dataclasses.replace(base, **changes))
            try:
                rows += evaluate(service, docset, collection, phase, variant)
            finally:
                service.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"collection": collection, "load": os.getloadavg(), "rows": rows}, indent=2))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| phase | variant | configuration | nDCG@10 | p50 ms | p95 ms | retrieval p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['phase']} | {r['variant']} | {r['config']} | {r['ndcg@10']:.4f} | {r['p50_ms']:.1f} | "
            f"{r['p95_ms']:.1f} | {r['retrieval_p50_ms']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
