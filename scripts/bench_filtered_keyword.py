#!/usr/bin/env python3
"""The keyword arm with filters or required terms: the passing chunks probed against every posting read (issue 27).

A filtered keyword query (a ``source_prefix``, a quoted term) is scored exactly over the chunks that pass.
``rag_service.db.bm25`` chooses at run time between probing each passing chunk's postings through the
primary key and reading every posting of the query's lexemes (``PROBE_COST_IN_POSTINGS``). This times,
interleaved, the arm as shipped against the arm forced to read every posting (the only way before), on
a database of ``scripts/bench_bulk_load.py`` (sources ``synthetic/0000001.txt`` ..., 10 chunks each):
real questions with ``source_prefix`` filters of several sizes, and the questions that quote a term.

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_filtered_keyword.py --database rag_bulk_1m_bulk_real
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time

import bench
import numpy as np
from bench_lib import real_text, retrievers, store

from rag_service.config import load_settings
from rag_service.db import bm25
from rag_service.db import search as search_module
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import SearchRequest, hybrid_search
from rag_service.db.search_request import ChunkFilters

DATASETS = bench.REPO.parent / "shared" / "datasets"
#: source prefixes and the share of a 1M-chunk corpus of 100k documents each keeps
PREFIXES = {"synthetic/00000": "0.1%", "synthetic/0000": "1%", "synthetic/000": "10%"}


def _timed(db: Database, request: SearchRequest, probe_cost: int) -> tuple[float, list[int]]:
    bm25.PROBE_COST_IN_POSTINGS = probe_cost
    search_module._STATEMENTS = search_module.StatementCache()  # rebuilt with this cost
    started = time.perf_counter()
    with db.transaction() as session:
        hits = hybrid_search(session, request)
    return (time.perf_counter() - started) * 1000, [h.chunk_id for h in hits]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="rag_bulk_1m_bulk_real")
    parser.add_argument("--queries", type=int, default=40, help="questions per filter")
    args = parser.parse_args()
    settings = load_settings()
    db = Database(store.engine_for(bench.server_url(settings), args.database, settings))
    with db.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    shipped = bm25.PROBE_COST_IN_POSTINGS
    questions = real_text.real_queries(DATASETS, per_set=400, seed=5)
    quoted = [q for q in questions if '"' in q]
    plain = [q for q in questions if '"' not in q][: args.queries]
    cases: dict[str, list[SearchRequest]] = {}
    for prefix, share in PREFIXES.items():
        cases[f"source_prefix {prefix} ({share})"] = [
            dataclasses.replace(
                retrievers.search_request(
                    settings, preset, None, retrievers.QueryParts.of(q), vector_weight=0.0, keyword_weight=1.0
                ),
                filters=ChunkFilters.parse({"source_prefix": prefix}),
            )
            for q in plain
        ]
    cases[f"quoted terms ({len(quoted)} questions)"] = [
        retrievers.search_request(
            settings, preset, None, retrievers.QueryParts.of(q), vector_weight=0.0, keyword_weight=1.0
        )
        for q in quoted
    ]
    rng = random.Random(7)
    out: dict[str, dict[str, object]] = {}
    for case, requests in cases.items():
        times: dict[str, list[float]] = {"shipped": [], "every_posting": []}
        for request in requests:
            order = [("shipped", shipped), ("every_posting", 10**9)]
            rng.shuffle(order)
            found = {}
            for name, cost in order:
                _timed(db, request, cost)  # warm
                ms, ids = _timed(db, request, cost)
                times[name].append(ms)
                found[name] = ids
            assert found["shipped"] == found["every_posting"], f"{case}: the two sides disagree"
        out[case] = {
            name: {"p50": round(float(np.percentile(t, 50)), 1), "p95": round(float(np.percentile(t, 95)), 1)}
            for name, t in times.items()
        }
        print(case, out[case], flush=True)
    bm25.PROBE_COST_IN_POSTINGS = shipped
    print(json.dumps({"database": args.database, "cases": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
