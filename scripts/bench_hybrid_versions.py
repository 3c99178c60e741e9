#!/usr/bin/env python
"""Hybrid SQL p50/p95 of this checkout against another version of the code, interleaved, one corpus.

    scripts/bench_hybrid_versions.py --old /tmp/old --size 30000 --queries 200

``--old`` is a folder holding another version's ``rag_service`` package (e.g. ``git archive
<commit> rag_service | tar -x -C /tmp/old``); it is copied as ``rag_service_old`` so both versions
live in one process. The synthetic corpus is ``bench.py``'s (``rag_bench_<size>``, reused when it
exists); each query runs through both versions' ``hybrid_search`` (one transaction each, the
stored ``workflow`` preset's statement), in a random order per step (``measure.time_retrievers``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import DEFAULT_SCIFACT, server_url
from bench_lib import corpus as synth
from bench_lib import measure, retrievers, store

from rag_service.config import load_settings
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import hybrid_search


def old_package(folder: Path) -> Any:
    """``folder/rag_service`` imported as ``rag_service_old`` (its absolute imports rewritten)."""
    target = Path(tempfile.mkdtemp()) / "rag_service_old"
    shutil.copytree(folder / "rag_service", target)
    for path in target.rglob("*.py"):
        path.write_text(re.sub(r"\brag_service\b", "rag_service_old", path.read_text()))
    sys.path.insert(0, str(target.parent))
    return importlib.import_module("rag_service_old.db.search")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--size", type=int, default=30_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    old = old_package(args.old)
    settings = load_settings()
    url = server_url(settings)
    vocabulary = synth.load_vocabulary(DEFAULT_SCIFACT / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size, seed=args.seed)
    name = f"rag_bench_{store.size_label(args.size)}"
    store.ensure_loaded(url, name, corpus, settings, rebuild=False)
    engine = store.engine_for(url, name, settings)
    database = Database(engine)
    count = args.warmup + args.queries
    work, _ = measure.make_workload(engine, corpus, vocabulary.words, count=count, seed=args.seed)
    with database.transaction() as session:
        preset = load_preset(session, "workflow")

    def request(i: int) -> Any:
        return retrievers.search_request(settings, preset, work.queries.vectors[i], work.parts[i])

    def new(i: int) -> list[int]:
        with database.transaction() as session:
            return [h.chunk_id for h in hybrid_search(session, request(i))]

    def before(i: int) -> list[int]:
        fields = {f.name: getattr(request(i), f.name) for f in dataclasses.fields(old.SearchRequest)}
        fields["filters"] = old.ChunkFilters()
        with database.transaction() as session:
            return [h.chunk_id for h in old.hybrid_search(session, old.SearchRequest(**fields))]

    load_before = measure.load_average()
    recorder, results, _ = measure.time_retrievers(
        {"before": before, "after": new}, warmup=args.warmup, queries=args.queries, desc=name, seed=args.seed
    )
    same = sum(a == b for a, b in zip(results["before"], results["after"], strict=True))
    summary = measure.latency_summary(recorder)
    print(json.dumps({"size": args.size, "load": [load_before, measure.load_average()], "latency": summary}))
    print(f"identical results: {same}/{args.queries}")
    for key, stats in summary.items():
        print(f"| {key} | {stats['p50']:.2f} | {stats['p95']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
