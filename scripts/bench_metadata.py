#!/usr/bin/env python3
"""What chunk keywords and document summaries cost at ingestion (issue 17 point 3).

Indexes the markdown files under DIR (default: ray-docs-qa's ``docs/``) into a fresh embedded
database in a temporary data dir, with the hashing embedder (no model: only the write path and the
summaries are timed), once per configuration and round, configurations interleaved in a fresh order
each round: nothing, keywords only, summaries only, both. Each run goes into a new collection, so
keywords see the collection growing as on a first ingestion. Prints the median seconds per run, the
extra milliseconds per chunk over "nothing", and that extra as a share of the bundled model's
embedding time (``--embed-rate`` chunks per second: ~45 on this 2-core machine, docs/notes.md).

    .venv/bin/python scripts/bench_metadata.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

CONFIGS = {
    "nothing": {"chunk_keywords": 0, "summary_sentences": 0},
    "keywords": {"chunk_keywords": 8, "summary_sentences": 0},
    "summaries": {"chunk_keywords": 0, "summary_sentences": 3},
    "both": {"chunk_keywords": 8, "summary_sentences": 3},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_docs = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "ray-docs-qa" / "docs"
    parser.add_argument("dir", type=Path, nargs="?", default=default_docs)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embed-rate", type=float, default=45.0, help="model chunks per second, for the share")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rag-bench-meta-") as data_dir:
        os.environ.setdefault("RAG_DATA_DIR", data_dir)
        os.environ.setdefault("RAG_EMBEDDED_SHARED_BUFFERS", "256MB")
        from rag_service.config import load_settings
        from rag_service.db import migrate
        from rag_service.db.database import Database
        from rag_service.db.engine import open_engine
        from rag_service.embed import HashingEmbedder
        from rag_service.service import UniversalRAGService

        settings = load_settings()
        engine = open_engine(settings)
        migrate.upgrade(engine)
        db = Database(engine)
        seconds: dict[str, list[float]] = {name: [] for name in CONFIGS}
        chunks = 0
        for round_ in range(args.rounds):
            order = list(CONFIGS)
            random.Random(round_).shuffle(order)
            for name in order:
                service = UniversalRAGService(
                    settings.model_copy(update=CONFIGS[name]), database=db, embedder=HashingEmbedder(), reranker=None
                )
                report = service.index_paths([args.dir], collection=f"bench-{name}-{round_}", root=args.dir)
                if not report.ok:
                    print("\n".join(report.lines()), file=sys.stderr)
                    return 1
                seconds[name].append(report.seconds)
                chunks = report.chunks_written
        engine.dispose()

    base = statistics.median(seconds["nothing"])
    model_ms = 1000.0 / args.embed_rate
    print(
        f"{chunks} chunks per run, {args.rounds} rounds; model time at {args.embed_rate:g} chunks/s: {model_ms:.1f} ms/chunk"
    )
    print("| configuration | median s per run | extra ms per chunk | share of embedding time |")
    print("|---|---:|---:|---:|")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        extra = (median - base) * 1000.0 / chunks
        print(f"| {name} | {median:.2f} | {extra:.2f} | {extra / model_ms:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
