#!/usr/bin/env python3
"""Hostile queries cost bounded time: the retrieval stage on fuzzed queries against ordinary ones.

Indexes ``--chunks`` synthetic chunks (hashing embedder: the vector arm's cost does not depend on the
model) into a fresh collection, then runs ordinary questions and ``--fuzzed`` fuzzed queries of up
to 20,000 characters (random printable characters; words with ``-`` sprinkled in; long phrases;
unbalanced quotes), interleaved, through ``retrieve()`` with the ``search`` preset (3 query
variants, no reranker). Reports ``metrics.retrieval_time_ms`` (the SQL of all variants):
p50 / p95 / max of each kind and the ratio of the fuzzed maximum to the ordinary p95.
``--unbounded N`` also times N fuzzed queries with the per-query bounds lifted (the old behaviour).

    .venv/bin/python scripts/bench_hostile.py --chunks 10000 --fuzzed 1000 --markdown docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import string
import sys
import tempfile
from pathlib import Path

from scripts_util import replace_section

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server, stop_embedded_server
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.retrieve import query as query_module
from rag_service.service import UniversalRAGService

VOCABULARY = [f"{stem}{suffix}" for stem in (
    "replica", "backup", "restore", "vector", "index", "query", "token", "budget", "parent", "chunk", "vacuum",
    "checkpoint", "failover", "snapshot", "lexeme", "posting", "cluster", "schema", "trigger", "cache",
) for suffix in ("", "s", "ing", "ed", "er")]


def document(rng: random.Random) -> str:
    """About four 500-character chunks of Zipf-ish words."""
    weights = [1 / (i + 1) for i in range(len(VOCABULARY))]
    paragraphs = [" ".join(rng.choices(VOCABULARY, weights, k=70)) + "." for _ in range(4)]
    return "\n\n".join(paragraphs)


def ordinary(rng: random.Random) -> str:
    return "how does " + " ".join(rng.sample(VOCABULARY, rng.randint(2, 6))) + " work?"


def fuzzed(rng: random.Random) -> str:
    length = rng.randint(1, 20_000)
    kind = rng.randrange(4)
    if kind == 0:
        return "".join(rng.choice(string.printable) for _ in range(length))
    words = [rng.choice(VOCABULARY) + str(rng.randrange(1000)) for _ in range(length // 7 + 1)]
    if kind == 1:
        text = " ".join("-" + w if rng.random() < 0.3 else w for w in words)
    elif kind == 2:
        text = " ".join(f'"{w}' if rng.random() < 0.1 else w for w in words)
    else:
        text = " ".join(f'-"{w} {v}"' if rng.random() < 0.2 else w for w, v in zip(words, reversed(words), strict=True))
    return text[:length]


def stats(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))], ordered[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--ordinary", type=int, default=300)
    parser.add_argument("--fuzzed", type=int, default=1000)
    parser.add_argument("--unbounded", type=int, default=0, help="also time N fuzzed queries without the bounds")
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()

    rng = random.Random(13)
    work = Path(tempfile.mkdtemp(prefix="rag_hostile_", dir="/tmp"))
    try:
        url = start_embedded_server(work / "data")
        settings = Settings(database_url=url, data_dir=work / "data")
        engine = make_engine(url, settings)
        migrate.upgrade(engine)
        service = UniversalRAGService(settings, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
        items = ((f"doc{i}", f"Doc {i}", document(rng)) for i in range(args.chunks // 4))
        report = service.index_texts(items, collection="hostile", strategy="recursive")
        print(f"indexed {report.chunks_written} chunks in {report.seconds:.1f} s", flush=True)

        def sql_ms(text: str) -> float:
            return service.retrieve(text, context="search", collection="hostile").metrics.retrieval_time_ms

        for _ in range(20):  # warm-up
            sql_ms(ordinary(rng))
        normal: list[float] = []
        hostile: list[tuple[float, int]] = []
        queries = ["o"] * args.ordinary + ["f"] * args.fuzzed
        rng.shuffle(queries)
        for kind in queries:
            if kind == "o":
                normal.append(sql_ms(ordinary(rng)))
            else:
                text = fuzzed(rng)
                hostile.append((sql_ms(text), len(text)))
        unbounded: list[float] = []
        if args.unbounded:
            for bound in ("MAX_QUERY_WORDS", "MAX_QUERY_FILTERS", "MAX_PHRASE_WORDS", "MAX_WORD_PARTS", "MAX_PHRASE_PARTS"):
                setattr(query_module, bound, 10**9)
            query_module.MAX_TERM_CHARS = 10**9
            unbounded = [sql_ms(fuzzed(rng)) for _ in range(args.unbounded)]
        engine.dispose()
    finally:
        stop_embedded_server(work / "data")
        shutil.rmtree(work, ignore_errors=True)

    o50, o95, omax = stats(normal)
    f50, f95, fmax = stats([ms for ms, _ in hostile])
    rows = [
        ("collection", f"{report.chunks_written} chunks (synthetic, hashing embedder), preset `search` (3 variants)"),
        (f"ordinary questions ({len(normal)}), p50 / p95 / max", f"{o50:.1f} / {o95:.1f} / {omax:.1f} ms"),
        (f"fuzzed queries ({len(hostile)}, 1-20,000 chars), p50 / p95 / max", f"{f50:.1f} / {f95:.1f} / {fmax:.1f} ms"),
        ("fuzzed max / ordinary p95 (target < 10)", f"{fmax / o95:.1f}"),
    ]
    if unbounded:
        u50, u95, umax = stats(unbounded)
        rows.append((f"without the bounds ({len(unbounded)} fuzzed), p50 / p95 / max", f"{u50:.1f} / {u95:.1f} / {umax:.1f} ms"))
    table = "\n".join(["| figure (retrieval stage: SQL of all variants) | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])
    print(table)
    if args.markdown:
        section = (
            "## Hostile queries cost bounded time\n\n"
            f"Command: `scripts/bench_hostile.py --chunks {args.chunks} --fuzzed {args.fuzzed} --unbounded {args.unbounded}`. "
            "Queries are cut to 8,000 characters, 32 distinct words, 8 phrases and -exclusions and 16 words per "
            "phrase, keeping the longest (`rag_service/retrieve/query.py`); a cut is reported in `metrics.degraded`.\n\n"
            + table
        )
        replace_section(args.markdown, "hostile", section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
