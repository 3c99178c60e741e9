#!/usr/bin/env python
"""retrieve() on a collection the planner's statistics know against a copy they do not (issue 23, 0).

    RAG_DATA_DIR=bench_out/shared_index_db scripts/bench_new_collection.py ../shared/datasets/anthropic-docs-qa

Copies the docs set's collection (indexed, e.g. by ``eval_shared_index.py``) into a new collection
in SQL, without ``ANALYZE`` (as when a new collection's rows stay under autoanalyze's threshold of
a large database), then asks every question of the set on both, interleaved, and prints the p50
and p95 of retrieve() and of its retrieval stage for each and their ratio. The copy is deleted at
the end. To measure another version of the code, put its checkout first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lib.copies import copy_collection
from sqlalchemy import text

import rag_service
from rag_service.evaluation.docrun import docset_collection
from rag_service.evaluation.docset import load_docset
from rag_service.service import build_service


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--preset", default="workflow")
    args = parser.parse_args()
    docset = load_docset(args.dataset_dir)
    known = docset_collection(args.dataset_dir)
    fresh = f"{known}-new-{int(time.time())}"
    service = build_service()
    try:
        with service.db.transaction() as session:
            copy_collection(session, source=known, target=fresh)
        timings: dict[str, dict[str, list[float]]] = {c: {"total": [], "retrieval": []} for c in (known, fresh)}
        for query in docset.queries.values():
            for collection in (known, fresh):
                metrics = service.retrieve(query, args.preset, collection=collection, max_chunks=10).metrics
                timings[collection]["total"].append(metrics.total_time_ms)
                timings[collection]["retrieval"].append(metrics.retrieval_time_ms)
    finally:
        with service.db.transaction() as session:
            session.execute(text("DELETE FROM documents WHERE collection = :c"), {"c": fresh})
        service.close()
    print(f"code: {Path(rag_service.__file__).parent}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| collection | retrieve() p50 ms | p95 ms | retrieval stage p50 ms | p95 ms |")
    print("|---|---|---|---|---|")
    for name, label in ((known, "known to the statistics"), (fresh, "new (not analysed)")):
        t = timings[name]
        print(
            f"| {label} | {_p(t['total'], 50):.1f} | {_p(t['total'], 95):.1f} | "
            f"{_p(t['retrieval'], 50):.1f} | {_p(t['retrieval'], 95):.1f} |"
        )
    ratio = statistics.median(timings[fresh]["total"]) / statistics.median(timings[known]["total"])
    print(f"p50 ratio new / known: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
