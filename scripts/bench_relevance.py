#!/usr/bin/env python
"""What the calibrated relevance costs a query: ``retrieve()`` with and without it, interleaved in one run.

"Without" is the embedding model treated as uncalibrated (no per-candidate cosine, no collection
reference, no floor): the pipeline before issue 25.3. Each question is asked both ways, alternating
which goes first; the collection's reference is read once before timing, as a warm service has it.

    RAG_DATA_DIR=/tmp/relevance-data scripts/bench_relevance.py /work/shared/datasets/ray-docs-qa --context agent
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from rag_service.config import load_settings
from rag_service.evaluation.docrun import docset_collection
from rag_service.evaluation.docset import load_docset
from rag_service.retrieve import relevance
from rag_service.service import build_service


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a documentation set already indexed (rag eval DIR)")
    parser.add_argument("--context", default="agent")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    docset = load_docset(args.dataset)
    collection = docset_collection(args.dataset)
    service = build_service(load_settings())
    saved = dict(relevance.CALIBRATIONS)
    timings: dict[str, list[float]] = {"calibrated": [], "uncalibrated": []}

    def ask(query: str, calibrated: bool) -> None:
        relevance.CALIBRATIONS.clear()
        if calibrated:
            relevance.CALIBRATIONS.update(saved)
        started = time.perf_counter()
        service.retrieve(query, args.context, collection=collection, rerank_enabled=False)
        timings["calibrated" if calibrated else "uncalibrated"].append((time.perf_counter() - started) * 1000)

    try:
        queries = list(docset.queries.values())
        for query in queries[:10]:  # warm-up: model, statement cache, the collection's reference
            ask(query, True)
            ask(query, False)
        timings = {"calibrated": [], "uncalibrated": []}
        for round_number in range(args.rounds):
            for i, query in enumerate(queries):
                first = (i + round_number) % 2 == 0
                ask(query, first)
                ask(query, not first)
    finally:
        relevance.CALIBRATIONS.clear()
        relevance.CALIBRATIONS.update(saved)
        service.close()
    for name, values in timings.items():
        ordered = sorted(values)
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        print(f"{name:13s} n={len(values)} p50={statistics.median(values):.2f} ms p95={p95:.2f} ms")
    ratio = statistics.median(timings["calibrated"]) / statistics.median(timings["uncalibrated"])
    print(f"p50 ratio calibrated/uncalibrated: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
