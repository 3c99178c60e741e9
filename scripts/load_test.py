#!/usr/bin/env python3
"""Many threads calling retrieve() across presets while a reindex rewrites the corpus.

Checks: zero errors; no result ever shows one document in two versions (every paragraph carries its
version tag, so a half-indexed document would show both); the connection pool and the server's
connections stay within the pool bounds; resident memory stays flat over all calls.

    .venv/bin/python scripts/load_test.py --threads 16 --calls 500 --markdown docs/reliability.md
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil
from sqlalchemy import text

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server, stop_embedded_server
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder, SentenceTransformerEmbedder
from rag_service.service import UniversalRAGService

CONTEXTS = ("chatbot", "agent", "search", "workflow", "context_engineering")
QUERIES = (
    "how are replicas promoted",
    "backup restore schedule",
    "vector index tuning",
    "token budget",
    "parent chunk",
)
TAG = re.compile(r"\bver(\d+)x\b")


def document(index: int, version: int) -> str:
    rng = random.Random(index)
    words = ["replica", "backup", "restore", "vector", "index", "query", "token", "budget", "parent", "chunk"]
    parts = [f"# Topic {index}\n"]
    for s in range(3):
        body = " ".join(rng.choice(words) for _ in range(70))
        parts.append(
            f"## Part {s}\n\n{body} ver{version}x.\n\nMore about {words[s]} and {words[index % 10]} ver{version}x.\n"
        )
    return "\n".join(parts)


@dataclass
class Report:
    calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    torn: int = 0
    reindex_runs: int = 0
    max_checked_out: int = 0
    max_server_connections: int = 0
    rss_mb: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0


def run(
    threads: int, calls: int, documents: int, model: str, *, parallel_arms_from: int | None = None
) -> tuple[Report, Settings]:
    """``parallel_arms_from``: the service's ``RAG_PARALLEL_ARMS_FROM`` (default: its own; 1: every search)."""
    workdir = Path(tempfile.mkdtemp(prefix="rag_load_", dir="/tmp"))
    corpus = workdir / "kb"
    corpus.mkdir()
    url = start_embedded_server(workdir / "data")
    settings = Settings(database_url=url, data_dir=workdir / "data", pool_size=8, pool_max_overflow=4)
    if parallel_arms_from is not None:
        settings = replace(settings, parallel_arms_from=parallel_arms_from)
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    embedder = SentenceTransformerEmbedder() if model == "real" else HashingEmbedder()
    service = UniversalRAGService(settings, database=Database(engine), embedder=embedder, reranker=None)
    for i in range(documents):
        (corpus / f"t{i:03d}.md").write_text(document(i, 0))
    service.index_paths([corpus], collection="load")
    report = Report()
    process = psutil.Process()
    stop = threading.Event()
    lock = threading.Lock()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        for n in range(calls):
            started = time.perf_counter()
            try:
                result = service.retrieve(rng.choice(QUERIES), context=rng.choice(CONTEXTS), collection="load")
            except Exception as exc:  # counted: the target is zero
                with lock:
                    report.errors[f"{type(exc).__name__}: {exc}"[:160]] += 1
                continue
            elapsed = (time.perf_counter() - started) * 1000
            versions: dict[int, set[str]] = {}
            for chunk in result.chunks:
                versions.setdefault(chunk.document_id, set()).update(TAG.findall(chunk.content))
            with lock:
                report.calls += 1
                report.latencies.append(elapsed)
                report.torn += sum(1 for v in versions.values() if len(v) > 1)
                report.max_checked_out = max(report.max_checked_out, engine.pool.checkedout())
                if report.calls % 500 == 0:
                    report.rss_mb.append(process.memory_info().rss / 2**20)
            if n % 100 == 0:
                with engine.connect() as conn:
                    count = conn.execute(
                        text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
                    ).scalar_one()
                with lock:
                    report.max_server_connections = max(report.max_server_connections, int(count))

    def reindexer() -> None:
        version = 0
        while not stop.is_set():
            version += 1
            for i in range(documents):
                (corpus / f"t{i:03d}.md").write_text(document(i, version))
            try:
                result = service.index_paths([corpus], collection="load")
            except Exception as exc:  # counted like a reader's error, never lost with the thread
                with lock:
                    report.errors[f"reindex: {type(exc).__name__}: {exc}"[:160]] += 1
                continue
            for problem in result.failed:
                with lock:
                    report.errors[f"reindex failed {problem.source}: {problem.reason}"[:160]] += 1
            report.reindex_runs += 1

    started = time.perf_counter()
    writer = threading.Thread(target=reindexer)
    writer.start()
    workers = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    writer.join()
    report.seconds = time.perf_counter() - started
    service.close()
    stop_embedded_server(workdir / "data")
    shutil.rmtree(workdir, ignore_errors=True)
    return report, settings


def markdown(report: Report, settings: Settings, *, threads: int, calls: int, model: str) -> str:
    lat = sorted(report.latencies)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0.0

    bound = settings.pool_size + settings.pool_max_overflow
    rss = report.rss_mb
    warm = rss[len(rss) // 4] if rss else 0.0
    errors = ", ".join(f"{k} x{v}" for k, v in report.errors.most_common(3)) or "none"
    return "\n".join(
        [
            "## Load: concurrent retrieve() during reindex",
            "",
            f"Command: `scripts/load_test.py --threads {threads} --calls {calls} --model {model}`",
            "",
            "| figure | value |",
            "|---|---|",
            f"| calls | {report.calls} of {threads * calls} ({threads} threads x {calls}, presets at random) |",
            f"| errors | {errors} |",
            f"| results showing a document in two versions | {report.torn} |",
            f"| reindex runs completed meanwhile (every document rewritten each run) | {report.reindex_runs} |",
            f"| retrieve() latency p50 / p95 | {pct(0.5):.1f} / {pct(0.95):.1f} ms |",
            f"| pool checked out, max (bound {bound}) | {report.max_checked_out} |",
            f"| server connections to the database, max | {report.max_server_connections} |",
            f"| resident memory after 25% / at the end / max | {warm:.0f} / {rss[-1] if rss else 0:.0f} / {max(rss or [0]):.0f} MiB |",
            f"| wall time | {report.seconds:.1f} s |",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--documents", type=int, default=60)
    parser.add_argument("--model", choices=["hashing", "real"], default="hashing")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    report, settings = run(args.threads, args.calls, args.documents, args.model)
    section = markdown(report, settings, threads=args.threads, calls=args.calls, model=args.model)
    print(section)
    if args.markdown:
        sys.path.insert(0, str(Path(__file__).parent))
        from scripts_util import replace_section

        replace_section(args.markdown, "load", section)
    bound = settings.pool_size + settings.pool_max_overflow
    ok = not report.errors and not report.torn and report.max_checked_out <= bound
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
