#!/usr/bin/env python3
"""What chunk keywords and document summaries cost at ingestion (issue 17 point 3).

Indexes the markdown files under DIR (default: ray-docs-qa's ``docs/``) into a fresh embedded
database in a temporary data dir, with the hashing embedder (no model: only the write path and the
summaries are timed), once per configuration and round, configurations interleaved in a fresh order
each round: nothing, keywords only, summaries only, both. Each run goes into a new collection, so
keywords see the collection growing as on a first ingestion. Prints the median seconds per run, the
extra milliseconds per chunk over "nothing", and that extra as a share of the bundled model's
embedding time per chunk, measured in the same run on ``--model-sample`` of the chunks (the machine's
load moves both alike; ``--model-sample 0`` uses ``--embed-rate`` instead). ``--files N`` takes the
first N files only.

    .venv/bin/python scripts/bench_metadata.py --rounds 3
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
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
    parser.add_argument("--model-sample", type=int, default=256, help="chunks embedded by the model to time it")
    parser.add_argument("--files", type=int, default=None, help="the first N files only")
    args = parser.parse_args()
    if args.files is not None:
        folder = Path(tempfile.mkdtemp(prefix="rag-bench-meta-docs-"))
        for path in sorted(args.dir.rglob("*.md"))[: args.files]:
            shutil.copy(path, folder / path.name)
        args.dir = folder

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
                    dataclasses.replace(settings, **CONFIGS[name]), database=db, embedder=HashingEmbedder(), reranker=None
                )
                report = service.index_paths([args.dir], collection=f"bench-{name}-{round_}", root=args.dir)
                if not report.ok:
                    print("\n".join(report.lines()), file=sys.stderr)
                    return 1
                seconds[name].append(report.seconds)
                chunks = report.chunks_written
        model_ms = 1000.0 / args.embed_rate
        if args.model_sample > 0:
            model_ms = _model_ms_per_chunk(db, "bench-nothing-0", args.model_sample)
        engine.dispose()

    base = statistics.median(seconds["nothing"])
    print(f"{chunks} chunks per run, {args.rounds} rounds; the bundled model: {model_ms:.1f} ms per chunk")
    print("| configuration | median s per run | extra ms per chunk | share of embedding time |")
    print("|---|---:|---:|---:|")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        extra = (median - base) * 1000.0 / chunks
        print(f"| {name} | {median:.2f} | {extra:.2f} | {extra / model_ms:.1%} |")
    return 0


def _model_ms_per_chunk(db: object, collection: str, sample: int) -> float:
    """Milliseconds per chunk the bundled MiniLM takes on ``sample`` stored chunk texts (batches as ingestion)."""
    from sqlalchemy import text

    from rag_service.config import BUNDLED_MINILM
    from rag_service.embed import embedder_for

    with db.transaction() as session:  # type: ignore[attr-defined]
        texts = list(
            session.execute(
                text("SELECT content FROM document_chunks WHERE collection = :c ORDER BY id LIMIT :n"),
                {"c": collection, "n": sample},
            ).scalars()
        )
    model = embedder_for(BUNDLED_MINILM)
    model.embed_documents(texts[:8])  # load it
    started = time.perf_counter()
    model.embed_documents(texts)
    return (time.perf_counter() - started) * 1000.0 / len(texts)


if __name__ == "__main__":
    sys.exit(main())
