#!/usr/bin/env python3
"""The BM25 arm's posting budget on real text at scale: overlap of its top 20 with exact BM25 (issue 27 point 2).

The corpus is ``bench_lib.real_text``'s: chunks of 3-7 real sentences of one source document of the
visible datasets, with real term statistics (Zipf's law, topical repetition); the queries are the
datasets' real questions. The database is loaded through the product's bulk path
(``rag_service.db.bulk.BulkLoad``: COPY, set-based postings and statistics, indexes after the load)
without the HNSW index (vectors are a constant: only the keyword arm is measured here). Each query runs
the keyword arm exactly (``bm25_max_postings`` 0) and under each budget, interleaved in a random order;
*overlap* is the share of the exact top 20 that the budgeted arm returns, *score kept* the BM25 score
sum of its 20 over the exact 20's.

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_bm25_real.py --size 1000000 --budgets 6000,12000

``--database`` measures a database ``scripts/bench_bulk_load.py --corpus real`` loaded instead (the same
chunks with realistic vectors and the HNSW index: the databases of the cost-by-size table); with it, ``--fused``
also compares the hybrid's fused top 10 and 20 (the questions embedded by the default model, ``ef_search`` from
``--size``) under the first budget and with the exact arm: what the budget changes in what ``retrieve()`` ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import bench
import numpy as np
from bench_lib import measure, real_text, retrievers, store
from sqlalchemy import Engine, text
from tqdm import tqdm

from rag_service.config import BUNDLED_MINILM, Preset, Settings, load_settings
from rag_service.db import bm25, migrate
from rag_service.db import documents as repo
from rag_service.db.bulk import BulkLoad, StagedDocument
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import SearchRequest, hybrid_search
from rag_service.embed import embedder_for
from rag_service.ingest.fingerprint import chunker_fingerprint, content_hash

DATASETS = bench.REPO.parent / "shared" / "datasets"
CHUNKS_PER_DOCUMENT = 10
TOP_K = 20


def _load(db: Database, chunks: list[str]) -> dict[str, float]:
    """Chunks as documents of ten through the bulk path, into collection ``bench`` of an empty database."""
    vector = np.full(384, 1.0 / np.sqrt(384.0), dtype=np.float32)
    chunker = chunker_fingerprint("recursive", chunk_size=500, chunk_overlap=100)
    started = time.perf_counter()
    with db.transaction() as session:
        repo.commit_synchronously(session)
        session.execute(text("DROP INDEX IF EXISTS ix_document_chunks_embedding_hnsw"))  # keyword arm only
        load = BulkLoad(session, collection=store.COLLECTION, fts_config="english", keywords=repo.ChunkKeywords(0))
        load.start()
        for start in tqdm(range(0, len(chunks), 100 * CHUNKS_PER_DOCUMENT), desc="staging", unit="batch"):
            batch = []
            for first in range(start, min(start + 100 * CHUNKS_PER_DOCUMENT, len(chunks)), CHUNKS_PER_DOCUMENT):
                texts = chunks[first : first + CHUNKS_PER_DOCUMENT]
                rows, offset = [], 0
                for position, content in enumerate(texts):
                    rows.append(
                        repo.ChunkRow(
                            chunk_index=position, chunk_type="text", content=content, start_char=offset,
                            end_char=offset + len(content), token_count=len(content) // 4,
                            content_hash=content_hash(content), embedding=vector,
                        )
                    )  # fmt: skip
                    offset += len(content) + 2
                content = "\n\n".join(texts)
                source = f"real/{first // CHUNKS_PER_DOCUMENT + 1:07d}.txt"
                batch.append(StagedDocument(source, source, content, content_hash(content), chunker, rows))
            load.add_documents(batch)
        timings = load.finish(lambda phase: print(f"[{time.perf_counter() - started:7.1f} s] {phase}", flush=True))
    with db.transaction() as session:
        session.execute(text("ANALYZE documents, document_chunks, chunk_terms"))
    timings["total"] = time.perf_counter() - started
    return {k: round(v, 1) for k, v in timings.items()}


def _sizes(db: Database) -> dict[str, str]:
    """Sizes of what the keyword arm reads: the postings with their two indexes, the lexeme statistics."""
    with db.transaction() as session:
        row = session.execute(
            text(
                "SELECT pg_size_pretty(pg_total_relation_size('chunk_terms')), "
                "pg_size_pretty(pg_relation_size('ix_chunk_terms_impact')), "
                "pg_size_pretty(pg_relation_size('pk_chunk_terms')), "
                "pg_size_pretty(pg_total_relation_size('lexeme_stats')), "
                "pg_size_pretty(pg_total_relation_size('document_chunks'))"
            )
        ).one()
    keys = (
        "chunk_terms_total",
        "ix_chunk_terms_impact",
        "pk_chunk_terms",
        "lexeme_stats_total",
        "document_chunks_total",
    )
    return dict(zip(keys, row, strict=True))


def _scores(db: Database, request: SearchRequest) -> tuple[list[int], list[float]]:
    with db.transaction() as session:
        hits = hybrid_search(session, request)
    return [h.chunk_id for h in hits], [h.keyword_score or 0.0 for h in hits]


def _ensure_loaded(url: str, settings: Settings, size: int, rebuild: bool) -> tuple[Engine, dict[str, float]]:
    """Database ``rag_real_<size>`` with the corpus of ``size`` chunks, built unless its comment says so."""
    sources = real_text.source_sentences(DATASETS)
    chunks = real_text.make_chunks(sources, size=size, seed=42)
    fingerprint = hashlib.sha256("\x00".join(chunks[:1000]).encode()).hexdigest()[:12]
    marker = f"rag_service real-text corpus {size} {fingerprint}"
    name = f"rag_real_{store.size_label(size)}"
    comment = store.database_comment(url, name) or ""
    if not rebuild and comment.startswith(marker):
        return store.engine_for(url, name, settings), json.loads(comment[len(marker) :] or "{}")
    store.recreate_database(url, name)
    engine = store.engine_for(url, name, settings)
    migrate.upgrade(engine)
    build = _load(Database(engine), chunks)
    store.set_database_comment(url, name, f"{marker} {json.dumps(build)}")
    return engine, build


def _slowest(samples: list[float], order: list[int], queries: list[str], count: int = 3) -> list[dict[str, object]]:
    """The ``count`` slowest timed questions of one variant: what a mean far above the p95 comes from."""
    ranked = sorted(zip(samples, order, strict=True), reverse=True)[:count]
    return [{"ms": round(ms, 1), "question": queries[i]} for ms, i in ranked]


def _fused_overlap(
    db: Database, settings: Settings, preset: Preset, queries: list[str], budget: int, size: int
) -> dict[str, float]:
    """The hybrid's fused top 10 and 20 with the BM25 arm under ``budget`` against with the exact arm."""
    embedder = embedder_for(BUNDLED_MINILM, backend=settings.embedding_backend, cache_dir=settings.data_dir / "models")
    vectors = embedder.embed_documents(queries)
    budgeted: list[list[int]] = []
    exact: list[list[int]] = []
    for question, vector in tqdm(zip(queries, vectors, strict=True), total=len(queries), desc="fused", unit="query"):
        request = retrievers.search_request(
            settings, preset, vector, retrievers.QueryParts.of(question), collection_chunks=size
        )
        for found, postings in ((budgeted, budget), (exact, 0)):
            with db.transaction() as session:
                hits = hybrid_search(session, dataclasses.replace(request, bm25_max_postings=postings))
            found.append([h.chunk_id for h in hits])
    budgeted10, exact10 = [b[:10] for b in budgeted], [e[:10] for e in exact]
    identical = [set(b) == set(e) for b, e in zip(budgeted10, exact10, strict=True)]
    return {
        "overlap_at_10": measure.overlap_at_k(budgeted10, exact10),
        "overlap_at_20": measure.overlap_at_k([b[:TOP_K] for b in budgeted], [e[:TOP_K] for e in exact]),
        "top10_identical_share": round(float(np.mean(identical)), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--budgets", default="6000,12000,24000")
    parser.add_argument(
        "--completions",
        default="",
        help="comma-separated chunks completed per candidate to try with the first budget (shipped: "
        f"{bm25.BOUNDED_COMPLETIONS_PER_CANDIDATE})",
    )
    parser.add_argument("--per-set", type=int, default=100, help="questions drawn from each dataset")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument(
        "--database", default="", help="an existing real-text database (bench_bulk_load.py --corpus real)"
    )
    parser.add_argument("--fused", action="store_true", help="with --database: the hybrid's top 10 / 20 too")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.fused and not args.database:
        parser.error("--fused needs --database (a database with realistic vectors)")

    settings = load_settings()
    url = bench.server_url(settings)
    if args.database:
        engine = store.engine_for(url, args.database, settings)
        build: dict[str, float] = {}
    else:
        engine, build = _ensure_loaded(url, settings, args.size, args.rebuild)
    db = Database(engine)
    with db.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    queries = real_text.real_queries(DATASETS, per_set=args.per_set, seed=7)
    budgets = [int(b) for b in args.budgets.split(",")]
    base = {
        i: retrievers.search_request(
            settings, preset, None, retrievers.QueryParts.of(q), vector_weight=0.0, keyword_weight=1.0
        )
        for i, q in enumerate(queries)
    }
    variants = {"exact": 0, **{f"budget_{b}": b for b in budgets}}
    per_candidate = {key: bm25.BOUNDED_COMPLETIONS_PER_CANDIDATE for key in variants}
    for c in (int(c) for c in args.completions.split(",") if c.strip()):
        variants[f"budget_{budgets[0]}_completions_{c}"] = budgets[0]
        per_candidate[f"budget_{budgets[0]}_completions_{c}"] = c
    sums: dict[str, dict[int, float]] = {key: {} for key in variants}  # each query's top-20 BM25 score sum

    def arm(key: str, budget: int):  # type: ignore[no-untyped-def]
        def run(i: int) -> list[int]:
            bm25.BOUNDED_COMPLETIONS_PER_CANDIDATE = per_candidate[key]  # read per call (a bound parameter)
            ids, scores = _scores(db, dataclasses.replace(base[i], bm25_max_postings=budget))
            sums[key][i] = sum(scores)
            return ids

        return run

    fns = {key: arm(key, budget) for key, budget in variants.items()}
    warmup = min(20, len(queries) // 5)
    recorder, results, order = measure.time_retrievers(
        fns,
        warmup=warmup,
        queries=len(queries) - warmup,
        desc=args.database or f"rag_real_{store.size_label(args.size)}",
        seed=42,
    )
    timed = range(warmup, len(queries))
    with db.transaction() as session:
        postings = [
            int(
                session.execute(
                    text(
                        "SELECT coalesce(sum(doc_freq), 0) FROM lexeme_stats WHERE collection = :c AND lexeme = "
                        "ANY(tsvector_to_array(to_tsvector('english', :q)))"
                    ),
                    {"c": store.COLLECTION, "q": base[i].bm25_text},
                ).scalar_one()
            )
            for i in timed
        ]
    # every returned score is the chunk's exact BM25 score, so a budget's sum over the exact arm's is its loss
    kept = {
        key: round(float(np.mean([sums[key][i] / sums["exact"][i] for i in timed if sums["exact"][i] > 0])), 4)
        for key in variants
        if key != "exact"
    }
    out = {
        "measured_at": bench._now(),
        "chunks": args.size,
        "queries": len(queries) - warmup,
        "build": build,
        "relation_sizes": _sizes(db),
        "postings_per_query": {
            "p50": float(np.percentile(postings, 50)),
            "p95": float(np.percentile(postings, 95)),
            "max": max(postings),
        },
        "latency": measure.latency_summary(recorder),
        "overlap_at_20": {
            key: measure.overlap_at_k(results[key], results["exact"]) for key in variants if key != "exact"
        },
        "top20_exact_score_kept": kept,
        "slowest": {key: _slowest(recorder.samples(key), order[key], queries) for key in variants},
    }
    if args.fused:
        out["fused"] = _fused_overlap(db, settings, preset, queries, budgets[0], args.size)
    text_out = json.dumps(out, indent=1)
    print(text_out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text_out + "\n")
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
