#!/usr/bin/env python3
"""Where the vector arm's time goes on a large collection: the bare HNSW walk against the product's arm.

Interleaved per question (``bench_lib.measure.time_retrievers``), the same real questions and database as
``scripts/bench_one_node.py --corpus real`` (pass its ``--database``), prewarmed, ms p50 / p95:

* ``walk``: ``SELECT id ... ORDER BY embedding <=> q LIMIT k`` alone (raw psycopg, binary vector, the product's
  ``SET LOCAL`` settings: ``db.search.vector_scan_settings``, one transaction);
* ``walk_rows``: the same with each row's chunk and document columns the product returns (``hit_columns``);
* ``statement``: the product's hybrid statement with the keyword weight 0, compiled once, on the raw connection;
* ``product``: the vector arm as ``Retriever`` runs it (``Database.transaction`` + ``fused_search``, ``SearchHit``s).

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_vector_arm.py --database rag_bulk_1m_bulk_real
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

import bench
import psycopg
from bench_lib import corpus as synth
from bench_lib import measure, real_text, retrievers, store
from pgvector.psycopg import register_vector
from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, select

from rag_service.config import BUNDLED_MINILM, SCHEMA_EMBEDDING_DIM, load_settings
from rag_service.db.admin import database_url
from rag_service.db.database import Database
from rag_service.db.models import Document, DocumentChunk
from rag_service.db.parallel_search import fused_search
from rag_service.db.presets import load_preset
from rag_service.db.search import build_search, hit_columns, search_parameters, vector_scan_settings
from rag_service.db.search_request import SearchRequest
from rag_service.embed import embedder_for

DATASETS = bench.REPO.parent / "shared" / "datasets"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", type=Path, default=bench.REPO / "bench_out" / "vector_arm.json")
    args = parser.parse_args()

    settings = load_settings()
    url = bench.server_url(settings)
    engine = store.engine_for(url, args.database, settings)
    database = Database(engine)
    embedder = embedder_for(BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models")
    count = args.warmup + args.queries
    texts = real_text.real_queries(DATASETS, per_set=count, seed=11)[:count]  # as bench_one_node's real workload
    queries = synth.QuerySet(texts=texts, vectors=embedder.embed_documents(texts), source_chunks=[-1] * len(texts))
    work = retrievers.Workload(queries=queries, frequent=queries)
    with database.transaction() as session:
        preset = load_preset(session, bench.PRESET)

    def request(i: int) -> SearchRequest:
        return retrievers.vector_request(settings, preset, work, i, collection_chunks=args.size)

    ef = request(0).ef_search
    k = request(0).limit
    raw = psycopg.connect(database_url(url, args.database).replace("+psycopg", ""))
    register_vector(raw)
    c, d = DocumentChunk, Document
    rows_statement = (
        select(c.id, *hit_columns())
        .join(d, (d.collection == c.collection) & (d.id == c.document_id))
        .where(c.collection == "bench")
        .order_by(c.embedding.op("<=>")(bindparam("q", type_=Vector(SCHEMA_EMBEDDING_DIM))))
        .limit(k)
        .compile(engine)
    )
    rows_sql, rows_params = str(rows_statement), dict(rows_statement.params)
    compiled = build_search(request(0)).compile(engine)

    def in_transaction(sql: str, params: dict) -> list[int]:  # type: ignore[type-arg]
        with raw.transaction():
            raw.execute(vector_scan_settings(ef))
            return [row[0] for row in raw.execute(sql, params, prepare=True).fetchall()]

    def walk(i: int) -> list[int]:
        return in_transaction(
            "SELECT id FROM document_chunks WHERE collection = 'bench' ORDER BY embedding <=> %(q)s LIMIT %(k)s",
            {"q": queries.vectors[i], "k": k},
        )

    def walk_rows(i: int) -> list[int]:
        return in_transaction(rows_sql, {**rows_params, "q": queries.vectors[i]})

    def statement(i: int) -> list[int]:
        return in_transaction(str(compiled), {**compiled.params, **search_parameters(request(i))})

    def product(i: int) -> list[int]:
        with database.transaction() as session:
            return [hit.chunk_id for hit in fused_search(session, request(i))]

    monitor = psycopg.connect(database_url(url, args.database).replace("+psycopg", ""), autocommit=True)
    monitor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    store.prewarm(monitor, store.hot_relations(monitor))
    monitor.close()
    gc.collect()
    gc.freeze()
    timed = {"walk": walk, "walk_rows": walk_rows, "statement": statement, "product": product}
    recorder, results, _ = measure.time_retrievers(timed, warmup=args.warmup, queries=args.queries, desc="arm", seed=42)
    out = {
        "measured_at": bench._now(),
        "database": args.database,
        "ef_search": ef,
        "loadavg": measure.load_average(),
        "latency": measure.latency_summary(recorder),
        "same_ids_as_walk": {
            key: sum(r == w for r, w in zip(results[key], results["walk"], strict=True)) / args.queries for key in timed
        },
    }
    bench.write_report(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
