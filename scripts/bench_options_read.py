#!/usr/bin/env python3
"""What a query's reads before its search cost: three statements (preset, collection probe, stored
model) against ``db.presets.read_call_preset``'s one, interleaved in one process.

Runs on the synthetic 100k-chunk database of ``scripts/bench.py`` (collection ``bench``, preset
``workflow``), each read in its own transaction as ``retrieve()`` makes it; prints p50/p95 of both.

    RAG_DATA_DIR=bench_out/bench-data .venv/bin/python scripts/bench_options_read.py
"""

from __future__ import annotations

import sys
import time

from bench import server_url
from bench_lib import store
from sqlalchemy.orm import Session

from rag_service.config import Preset, load_settings
from rag_service.db.collections import require_collection
from rag_service.db.database import Database
from rag_service.db.index_settings import read_stored_model
from rag_service.db.presets import load_preset, read_call_preset

COLLECTION, PRESET, ROUNDS = "bench", "workflow", 600


def three_statements(session: Session) -> Preset:
    """The reads as ``retrieve()`` made them before ``read_call_preset``."""
    preset = load_preset(session, PRESET)
    require_collection(session, COLLECTION)
    read_stored_model(session)
    return preset


def one_statement(session: Session) -> Preset:
    return read_call_preset(session, PRESET, collection=COLLECTION).preset


def main() -> int:
    settings = load_settings()
    database = Database(store.engine_for(server_url(settings), "rag_bench_100k", settings))
    reads = {"three statements": three_statements, "one statement": one_statement}
    assert len({str(database.read(read)) for read in reads.values()}) == 1  # the same preset
    times: dict[str, list[float]] = {name: [] for name in reads}
    for i in range(ROUNDS + 50):
        for name in list(reads)[:: 1 if i % 2 else -1]:  # in turn first
            started = time.perf_counter()
            database.read(reads[name])
            if i >= 50:  # warm-up
                times[name].append((time.perf_counter() - started) * 1000)
    for name, values in times.items():
        values.sort()
        print(f"{name}: p50 {values[len(values) // 2]:.2f} ms, p95 {values[int(len(values) * 0.95)]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
