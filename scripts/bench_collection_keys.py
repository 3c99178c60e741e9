"""Hybrid SQL before and after the collection-keyed schema (migration 0005), interleaved in one run.

    .venv/bin/python scripts/bench_collection_keys.py --size 10000 --queries 300 [--base main]

Two databases hold the same synthetic corpus (``bench_lib``, as ``scripts/bench.py`` builds it): one at
head (keys start with ``collection``), one copied from it and migrated down to 0004. The statement of
the ``workflow`` preset (hybrid, linear fusion, bounded BM25) is compiled by this checkout for the
first and by ``--base`` (a git revision, exported to a temporary folder and run in a subprocess) for
the second; the same parameters are bound to both. Queries alternate between the two in a random
order per step, one transaction each, with the connection settings the service uses. Prints p50/p95
per side and the ratio after/before.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from bench_lib import corpus as synth
from bench_lib import store
from bench_lib.retrievers import QueryParts, search_request
from pgvector.psycopg import register_vector
from sqlalchemy.dialects import postgresql

from rag_service.config import load_settings
from rag_service.db import migrate
from rag_service.db.admin import admin_params, database_url
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine, normalise_url
from rag_service.db.presets import load_preset
from rag_service.db.search import build_search, search_parameters

REPO = Path(__file__).resolve().parents[1]
SCIFACT = Path(os.environ.get("RAG_BENCH_SCIFACT", "/work/shared/datasets/scifact"))

# run by the base revision's code: prints the compiled workflow-shape statement
_COMPILE_BASE = """
import json, sys
import numpy as np
from sqlalchemy.dialects import postgresql
from rag_service.db.search import SearchRequest, build_search
request = SearchRequest(**json.loads(sys.argv[1]), query_vector=np.zeros(384, dtype=np.float32))
compiled = build_search(request).compile(dialect=postgresql.dialect(paramstyle="pyformat"))
constants = {k: v for k, v in compiled.params.items() if isinstance(v, (int, float, str))}
print(json.dumps({"sql": str(compiled), "params": constants}))
"""


def compiled(request: Any) -> dict[str, Any]:
    """The statement's text and its parameters' values as built (constants included)."""
    built = build_search(request).compile(dialect=postgresql.dialect(paramstyle="pyformat"))
    return {"sql": str(built), "params": {k: v for k, v in built.params.items() if isinstance(v, int | float | str)}}


def base_statement(base: str, request: Any) -> dict[str, Any]:
    """The same request's statement as compiled by revision ``base``."""
    fields = {
        k: getattr(request, k)
        for k in (
            "collection",
            "any_terms",
            "required_terms",
            "vector_weight",
            "keyword_weight",
            "rrf_k",
            "fusion_method",
            "candidate_k",
            "limit",
            "fts_config",
            "ef_search",
            "keyword_scorer",
            "bm25_text",
            "bm25_k1",
            "bm25_b",
            "bm25_max_postings",
        )
    }
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", base, "rag_service"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        out = subprocess.run(
            [sys.executable, "-c", _COMPILE_BASE, json.dumps(fields)],
            env={**os.environ, "PYTHONPATH": folder},
            cwd=folder,
            check=True,
            capture_output=True,
            text=True,
        )
    return dict(json.loads(out.stdout))


def connect(url: str, ef_search: int) -> psycopg.Connection[Any]:
    conn = psycopg.connect(**{**admin_params(url), "autocommit": False})
    register_vector(conn)
    conn.execute("SET plan_cache_mode = force_custom_plan")
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', 'relaxed_order', false)",
        (str(int(ef_search)),),
    )
    conn.commit()
    return conn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--base", default="main", help="git revision with the old keys (default main)")
    parser.add_argument("--json", type=Path, default=REPO / "bench_out" / "bench-collection-keys.json")
    args = parser.parse_args(argv)

    settings = load_settings()
    server = (
        normalise_url(settings.database_url)
        if settings.database_url
        else start_embedded_server(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)
    )
    vocabulary = synth.load_vocabulary(SCIFACT / "corpus.jsonl")
    corpus = synth.make_corpus(vocabulary, size=args.size)
    new_db, old_db = f"rag_keys_new_{args.size}", f"rag_keys_old_{args.size}"
    store.ensure_loaded(server, new_db, corpus, settings, rebuild=False)
    store.recreate_database(server, old_db)  # dropped first, then created empty: replace it with a copy
    with psycopg.connect(**admin_params(server)) as admin:
        admin.execute(psycopg.sql.SQL("DROP DATABASE {}").format(psycopg.sql.Identifier(old_db)))
        admin.execute(
            psycopg.sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                psycopg.sql.Identifier(old_db), psycopg.sql.Identifier(new_db)
            )
        )
    engine = make_engine(database_url(server, old_db), settings)
    migrate.downgrade(engine, "0004")
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")
    with engine.connect() as conn:
        from sqlalchemy.orm import Session

        preset = load_preset(Session(bind=conn), "workflow")
    engine.dispose()

    queries = synth.make_queries(corpus, count=args.warmup + args.queries)
    requests = [
        search_request(settings, preset, queries.vectors[i], QueryParts.of(t)) for i, t in enumerate(queries.texts)
    ]
    statements: dict[str, dict[str, Any]] = {
        "after": compiled(requests[0]),
        "before": base_statement(args.base, requests[0]),
    }
    assert statements["after"]["sql"] != statements["before"]["sql"], "the base revision builds the same statement"
    conns = {
        "after": connect(database_url(server, new_db), requests[0].ef_search),
        "before": connect(database_url(server, old_db), requests[0].ef_search),
    }
    times: dict[str, list[float]] = {"after": [], "before": []}
    results: dict[str, list[list[int]]] = {"after": [], "before": []}
    rng = random.Random(1)
    for i, request in enumerate(requests):
        params = search_parameters(request)
        sides = ["after", "before"]
        rng.shuffle(sides)
        for side in sides:
            conn = conns[side]
            started = time.perf_counter()
            statement = statements[side]
            bound = {**statement["params"], **params}
            ids = [row[0] for row in conn.execute(statement["sql"], bound).fetchall()]
            conn.rollback()
            elapsed = (time.perf_counter() - started) * 1000
            if i >= args.warmup:
                times[side].append(elapsed)
                results[side].append(ids)
    same = sum(a == b for a, b in zip(results["after"], results["before"], strict=True))
    summary: dict[str, Any] = {"size": args.size, "queries": args.queries, "base": args.base, "same_results": same}
    for side, values in times.items():
        values.sort()
        summary[side] = {
            "p50_ms": round(statistics.median(values), 2),
            "p95_ms": round(float(np.percentile(values, 95)), 2),
        }
    summary["p95_ratio_after_before"] = round(summary["after"]["p95_ms"] / summary["before"]["p95_ms"], 3)
    summary["p50_ratio_after_before"] = round(summary["after"]["p50_ms"] / summary["before"]["p50_ms"], 3)
    summary["load_average"] = os.getloadavg()
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
