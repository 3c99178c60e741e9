#!/usr/bin/env python3
"""What term proximity (``RAG_PROXIMITY_WEIGHT``, ``db.proximity``) costs a query: ``retrieve()`` with and without it.

On the collections ``rag eval`` built for the visible sets (``beir-scifact``, ``docs-ray-docs-qa``,
``docs-anthropic-docs-qa`` in the same ``RAG_DATA_DIR``), each set's own questions go through two services that
differ only in the weight, interleaved in a fresh random order per step (``bench_lib.measure.time_retrievers``), no
rerank and no query expansion: wall time of the call and its SQL stage (``metrics.retrieval_time_ms``). The cost is
per returned row (the hit chunk's positions), so it does not grow with the collection's size.

    RAG_DATA_DIR=/work/evaldata .venv/bin/python scripts/bench_proximity.py --weight 0.2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import bench
from bench_lib import measure
from bench_lib.retrievers import RetrieverFn

from rag_service.config import load_settings
from rag_service.evaluation.latency import LatencyRecorder
from rag_service.service import UniversalRAGService, build_service

DATASETS = bench.REPO.parent / "shared" / "datasets"
#: set, its collection and the preset ``rag eval`` scores it with
SETS = (
    ("scifact", "beir-scifact", "search"),
    ("ray-docs-qa", "docs-ray-docs-qa", "workflow"),
    ("anthropic-docs-qa", "docs-anthropic-docs-qa", "workflow"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weight", type=float, default=0.2, help="the proximity weight timed against 0")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--wait-idle", type=float, default=0.6, metavar="LOAD")
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "proximity_latency.json")
    args = parser.parse_args()

    settings = load_settings()
    plain = build_service(dataclasses.replace(settings, proximity_weight=0.0))
    near = UniversalRAGService(  # the same database and model, only the weight differs
        dataclasses.replace(settings, proximity_weight=args.weight), database=plain.db, embedder=plain.embedder()
    )
    sql = LatencyRecorder()
    timed: dict[str, RetrieverFn] = {}
    for name, collection, preset in SETS:
        with (DATASETS / name / "queries.jsonl").open() as lines:
            texts = [json.loads(line)["text"] for line in lines][: args.warmup + args.queries]
        for label, service in (("off", plain), ("on", near)):
            timed[f"{name}_{label}"] = _retrieve(service, texts, collection, preset, sql, f"{name}_{label}_sql")
    bench.wait_for_quiet(args.wait_idle)
    load_before = measure.load_average()
    recorder, results, _ = measure.time_retrievers(timed, warmup=args.warmup, queries=args.queries, desc="proximity")
    out = {
        "measured_at": bench._now(),
        "weight": args.weight,
        "loadavg_before": load_before,
        "loadavg_after": measure.load_average(),
        "retrieve_ms": measure.latency_summary(recorder),
        "sql_stage_ms": measure.latency_summary(_timed_only(sql, args.warmup)),
        "top10_changed": {name: _changed(results[f"{name}_off"], results[f"{name}_on"]) for name, _, _ in SETS},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("retrieve_ms", "sql_stage_ms", "top10_changed")}, indent=2))
    return 0


def _retrieve(
    service: UniversalRAGService, texts: list[str], collection: str, preset: str, sql: LatencyRecorder, key: str
) -> RetrieverFn:
    """``retrieve()`` of question ``i`` (modulo the set's count; result ids); its SQL stage goes to ``sql`` under ``key``."""

    def run(i: int) -> list[int]:
        result = service.retrieve(texts[i % len(texts)], preset, collection=collection, rerank_enabled=False, expand_query=False)
        sql.record(key, result.metrics.retrieval_time_ms)
        return [c.chunk_id for c in result.chunks]

    return run


def _timed_only(recorder: LatencyRecorder, warmup: int) -> LatencyRecorder:
    """``recorder`` without each key's first ``warmup`` samples (the warm-up calls)."""
    out = LatencyRecorder()
    for key in recorder.summary():
        for ms in recorder.samples(key)[warmup:]:
            out.record(key, ms)
    return out


def _changed(before: list[list[int]], after: list[list[int]]) -> float:
    """Share of questions whose top 10 changed (order or members)."""
    return round(sum(b[:10] != a[:10] for b, a in zip(before, after, strict=True)) / max(len(before), 1), 3)


if __name__ == "__main__":
    raise SystemExit(main())
