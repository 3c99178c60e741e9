#!/usr/bin/env python3
"""What the per-query stored-model check (issue 24.3) costs a ``retrieve()``: rounds with and without it.

A throwaway embedded database under /tmp, 300 short documents in one collection (hashing embedder, no
reranker); 40 rounds of 10 ``retrieve()`` calls, the check and a stub alternating (in turn first);
prints p50/p95 of the whole call for both.

    .venv/bin/python scripts/bench_model_check.py
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import rag_service.service as service_module
from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.embedded import embedded_server_url, stop_embedded_server
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService

ROUNDS, CALLS = 40, 10


def main() -> None:
    data = Path(tempfile.mkdtemp(prefix="rag_model_check_"))
    settings = Settings(database_url=None, data_dir=data, rerank_model="none")
    engine = make_engine(embedded_server_url(data), settings)
    try:
        migrate.upgrade(engine)
        service = UniversalRAGService(settings, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
        text = "Document {0} talks about backups, replicas and vacuum number {0}. "
        service.index_texts([(f"d{i}.txt", f"D{i}", text.format(i) * 5) for i in range(300)], collection="kb")
        real = service_module.read_stored_model
        variants = {"with check": real, "without": lambda session: None}
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(3):
            service.retrieve("backups replicas", "search", collection="kb")
        for round_ in range(ROUNDS):
            for name in sorted(variants, reverse=bool(round_ % 2)):
                service_module.read_stored_model = variants[name]  # type: ignore[assignment]
                for _ in range(CALLS):
                    started = time.perf_counter()
                    service.retrieve("backups replicas", "search", collection="kb")
                    times[name].append(time.perf_counter() - started)
        service_module.read_stored_model = real
        for name, values in times.items():
            values.sort()
            p95 = values[int(len(values) * 0.95)]
            print(f"{name}: n={len(values)} p50 {statistics.median(values) * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms")
        service.close()
    finally:
        engine.dispose()
        stop_embedded_server(data)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
