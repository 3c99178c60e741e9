#!/usr/bin/env python3
"""Exact BM25 over packed postings scored in numpy, against the SQL exact arm (issue 27 point 2's design record).

The question: can an exact top 20 be had at 1M chunks of real text without an extension? This builds, in
a database ``scripts/bench_bulk_load.py --corpus real`` loaded, a table ``packed_postings`` with each
lexeme's postings as three raw byte strings in chunk order (chunk id int4, tf int2, length int2, big-endian;
storage EXTERNAL, so nothing is decompressed), then for each real question:

- **packed**: fetch the question's lexemes' rows in binary, score every posting in numpy with the product's
  BM25 (``rag_service.db.bm25``'s idf and constants), keep the top 20 (a threshold from a 1/64 sample, so
  no partition over the whole score array); timed as fetch and score;
- **exact**: the product's exact keyword arm (``bm25_max_postings`` 0), for the overlap;
- **MaxScore share** (simulated, given the exact 20th score): the share of the postings a MaxScore
  evaluation would still fetch if each list could be read by blocks of ``--block`` postings: the
  essential lists whole, the others only in blocks holding a chunk that can still reach the 20th score.

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_bm25_packed.py --database rag_bulk_1m_bulk_real

The table stays in the database (``--rebuild`` makes it again); it is not part of the product.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

import bench
import numpy as np
from bench_lib import real_text, retrievers, store
from numpy.typing import NDArray

from rag_service.config import Settings, load_settings
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import hybrid_search

DATASETS = bench.REPO.parent / "shared" / "datasets"
TOP_K = 20
BUILD = """
CREATE TABLE packed_postings (lexeme text PRIMARY KEY, postings int NOT NULL, ids bytea, tfs bytea, lens bytea);
ALTER TABLE packed_postings ALTER COLUMN ids SET STORAGE EXTERNAL;
ALTER TABLE packed_postings ALTER COLUMN tfs SET STORAGE EXTERNAL;
ALTER TABLE packed_postings ALTER COLUMN lens SET STORAGE EXTERNAL;
INSERT INTO packed_postings
SELECT lexeme, count(*),
       string_agg(int4send(chunk_id::int4), ''::bytea ORDER BY chunk_id),
       string_agg(int2send(least(tf, 32767)::int2), ''::bytea ORDER BY chunk_id),
       string_agg(int2send(least(doc_len, 32767)::int2), ''::bytea ORDER BY chunk_id)
FROM chunk_terms WHERE collection = %(collection)s GROUP BY lexeme
"""
FETCH = (
    "SELECT s.doc_freq, p.ids, p.tfs, p.lens FROM lexeme_stats s JOIN packed_postings p USING (lexeme) "
    "WHERE s.collection = %s AND s.lexeme = ANY(tsvector_to_array(to_tsvector('english', %s)))"
)


@dataclasses.dataclass
class Posting:
    """One lexeme's postings: chunk ids in order and each posting's BM25 score."""

    ids: NDArray[np.int32]
    scores: NDArray[np.float32]


def _build(cursor: Any, rebuild: bool) -> float:
    cursor.execute("SELECT to_regclass('packed_postings') IS NOT NULL")
    if cursor.fetchone()[0] and not rebuild:
        return 0.0
    started = time.perf_counter()
    cursor.execute("DROP TABLE IF EXISTS packed_postings")
    cursor.execute("SET statement_timeout = 0")
    cursor.execute("SET work_mem = '256MB'")
    for statement in BUILD.strip().split(";\n"):
        cursor.execute(statement, {"collection": store.COLLECTION})
    cursor.connection.commit()
    return time.perf_counter() - started


def _lists(rows: Sequence[Any], chunks: int, average: float, settings: Settings) -> list[Posting]:
    """Score every posting as ``rag_service.db.bm25`` does: ``idf * (k1 + 1) * tf / (tf + k1 (1 - b + b len / avg))``."""
    k1, b = settings.bm25_k1, settings.bm25_b
    base, slope = np.float32(k1 * (1 - b)), np.float32(k1 * b / average)
    out = []
    for doc_freq, ids, tfs, lens in rows:
        weight = np.float32(np.log(1.0 + (chunks - doc_freq + 0.5) / (doc_freq + 0.5)) * (k1 + 1.0))
        tf = np.frombuffer(tfs, dtype=">i2").astype(np.float32)
        length = np.frombuffer(lens, dtype=">i2").astype(np.float32)
        out.append(
            Posting(
                np.frombuffer(ids, dtype=">i4").astype(np.int32),
                (weight * tf / (tf + base + slope * length)).astype(np.float32),
            )
        )
    return out


def _top(lists: list[Posting], size: int) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """The top ``TOP_K`` chunks by summed score (each lexeme's ids are unique, so one scatter-add each)."""
    total = np.zeros(size, dtype=np.float32)
    for posting in lists:
        total[posting.ids] += posting.scores
    sample = total[::64]
    cut = np.partition(sample, len(sample) - TOP_K)[len(sample) - TOP_K] if len(sample) > TOP_K else 0.0
    candidates = np.flatnonzero(total >= max(float(cut), 1e-30))  # at least TOP_K score this much
    top = candidates[np.argsort(-total[candidates], kind="stable")[:TOP_K]]
    return top, total[top]


def _maxscore_share(lists: list[Posting], theta: float, block: int) -> float:
    """Share of the postings MaxScore fetches given the 20th score ``theta``, reading lists by blocks."""
    ordered = sorted(lists, key=lambda p: float(p.scores.max()))
    skipped, bound = 0, 0.0
    while skipped < len(ordered) and bound + float(ordered[skipped].scores.max()) < theta:
        bound += float(ordered[skipped].scores.max())
        skipped += 1
    essential = ordered[skipped:]
    ids = np.concatenate([p.ids for p in essential])
    chunks, inverse = np.unique(ids, return_inverse=True)
    partial = np.bincount(inverse, np.concatenate([p.scores for p in essential]).astype(np.float64))
    alive = partial + bound >= theta
    candidates, partial, fetched = chunks[alive], partial[alive], len(ids)
    for posting in reversed(ordered[:skipped]):
        bound -= float(posting.scores.max())
        at = np.minimum(np.searchsorted(posting.ids, candidates), len(posting.ids) - 1)
        blocks = np.unique(at // block)
        fetched += int(np.minimum(block, len(posting.ids) - blocks * block).sum())
        partial = partial + np.where(posting.ids[at] == candidates, posting.scores[at], 0.0)
        keep = partial + bound >= theta
        candidates, partial = candidates[keep], partial[keep]
    return fetched / sum(len(p.ids) for p in lists)


def _pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    settings = load_settings()
    engine = store.engine_for(bench.server_url(settings), args.database, settings)
    db = Database(engine)
    with db.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    raw = engine.raw_connection()
    cursor: Any = raw.cursor()  # psycopg's: binary results
    built_s = _build(cursor, args.rebuild)
    cursor.execute(
        "SELECT c.chunk_count, c.total_length, (SELECT max(id) FROM document_chunks), "
        "pg_size_pretty(pg_total_relation_size('packed_postings')), "
        "pg_size_pretty(pg_total_relation_size('chunk_terms')) FROM collection_stats c WHERE c.collection = %s",
        (store.COLLECTION,),
    )
    chunks, total_length, max_id, packed_size, terms_size = cursor.fetchone()
    raw.commit()
    fetch_ms, score_ms, postings, overlap, shares = [], [], [], [], []
    for question in real_text.real_queries(DATASETS, per_set=100, seed=7)[: args.queries]:
        request = retrievers.search_request(
            settings, preset, None, retrievers.QueryParts.of(question), vector_weight=0.0, keyword_weight=1.0
        )
        started = time.perf_counter()
        cursor.execute(FETCH, (store.COLLECTION, request.bm25_text), binary=True)
        rows = cursor.fetchall()
        fetched = time.perf_counter()
        lists = _lists(rows, chunks, total_length / chunks, settings)
        top, _ = _top(lists, max_id + 1) if lists else (np.array([], dtype=np.int64), None)
        scored = time.perf_counter()
        raw.commit()
        with db.transaction() as session:
            hits = hybrid_search(session, dataclasses.replace(request, bm25_max_postings=0))[:TOP_K]
        if not hits:
            continue
        exact = {h.chunk_id for h in hits}
        overlap.append(len(exact & {int(i) for i in top}) / len(exact))
        fetch_ms.append((fetched - started) * 1000)
        score_ms.append((scored - fetched) * 1000)
        postings.append(sum(len(p.ids) for p in lists))
        shares.append(_maxscore_share(lists, min(h.keyword_score or 0.0 for h in hits), args.block))
    both = [f + s for f, s in zip(fetch_ms, score_ms, strict=True)]
    out = {
        "measured_at": bench._now(),
        "database": args.database,
        "chunks": chunks,
        "questions": len(overlap),
        "packed_build_s": round(built_s, 1),
        "packed_size": packed_size,
        "chunk_terms_size": terms_size,
        "postings_per_question": {"p50": _pct(postings, 50), "p95": _pct(postings, 95)},
        "fetch_ms": {"p50": _pct(fetch_ms, 50), "p95": _pct(fetch_ms, 95)},
        "score_ms": {"p50": _pct(score_ms, 50), "p95": _pct(score_ms, 95)},
        "packed_total_ms": {"p50": _pct(both, 50), "p95": _pct(both, 95)},
        "overlap_at_20_with_exact_arm": round(float(np.mean(overlap)), 4),
        "maxscore_share_fetched": {"block": args.block, "mean": round(float(np.mean(shares)), 3)},
    }
    print(json.dumps(out, indent=1))
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
