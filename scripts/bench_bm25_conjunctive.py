#!/usr/bin/env python3
"""An exact BM25 top 20 from conjunctive candidates through the GIN index, timed against the exact arm (issue 27).

A prototype of the pruning ``scripts/simulate_bm25_topk.py`` counts as *conjunctive candidates*: the
budgeted arm's 20th score ``theta`` (a lower bound of the exact 20th: its scores are exact) and each
lexeme's bound (``w / (1 + slope * min(len / tf))``, from the first posting of ``ix_chunk_terms_impact``)
give the minimal lexeme sets whose bounds reach theta; only a chunk holding all of one such set can be in
the top 20. They become one tsquery (ANDs joined by OR) for the GIN index on ``content_tsv``, and each
candidate is scored exactly from the postings' primary key. The result is checked against the exact arm
(same scores). Run on a database of ``scripts/bench_bm25_real.py``:

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/bench_bm25_conjunctive.py --database rag_real_100k
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import bench
import numpy as np
from bench_lib import real_text, retrievers, store
from sqlalchemy import text

from rag_service.config import load_settings
from rag_service.db.database import Database
from rag_service.db.presets import load_preset
from rag_service.db.search import hybrid_search
from rag_service.retrieve.query import bm25_text, parse_query

DATASETS = bench.REPO.parent / "shared" / "datasets"
TOP_K = 20
#: queries whose sufficient sets outnumber this are skipped (the tsquery would be enormous)
MAX_CLAUSES = 400

_TERMS = text(
    "WITH st AS (SELECT chunk_count::float8 AS n, total_length::float8 / chunk_count AS avglen "
    "FROM collection_stats WHERE collection = :c) "
    "SELECT l.lexeme, ln(1 + (st.n - l.doc_freq + 0.5) / (l.doc_freq + 0.5)) * (:k1 + 1) AS weight, "
    ":k1 * :b / st.avglen AS slope, "
    "(SELECT doc_len::float8 / tf FROM chunk_terms t WHERE t.collection = :c AND t.lexeme = l.lexeme "
    "ORDER BY doc_len::float8 / tf LIMIT 1) AS min_ratio "
    "FROM lexeme_stats l, st WHERE l.collection = :c "
    "AND l.lexeme = ANY(tsvector_to_array(to_tsvector('english', :q)))"
)
_SCORE = text(
    "WITH cand AS MATERIALIZED (SELECT id FROM document_chunks WHERE content_tsv @@ CAST(:tsq AS tsquery) "
    "AND collection = :c), "
    "q AS (SELECT * FROM unnest(CAST(:lexemes AS text[]), CAST(:weights AS float8[])) AS q(lexeme, weight)) "
    "SELECT t.chunk_id, sum(q.weight * t.tf / (t.tf + :base + :slope * t.doc_len)) AS score, "
    "count(*) OVER () AS candidates "
    "FROM cand JOIN chunk_terms t ON t.collection = :c AND t.chunk_id = cand.id "
    "AND t.lexeme = ANY(CAST(:lexemes AS text[])) JOIN q ON q.lexeme = t.lexeme "
    "GROUP BY t.chunk_id ORDER BY score DESC, t.chunk_id LIMIT 20"
)


def sufficient_sets(bounds: list[tuple[str, float]], theta: float) -> list[list[str]]:
    """Minimal lexeme sets whose bounds reach ``theta`` (``bounds`` sorted largest first), at most
    ``MAX_CLAUSES + 1``."""
    out: list[list[str]] = []

    def extend(start: int, chosen: list[str], total: float) -> None:
        for i in range(start, len(bounds)):
            if len(out) > MAX_CLAUSES:
                return
            lexeme, bound = bounds[i]
            if total + bound >= theta:
                out.append([*chosen, lexeme])
            elif total + bound + sum(b for _, b in bounds[i + 1 :]) >= theta:
                extend(i + 1, [*chosen, lexeme], total + bound)

    extend(0, [], 0.0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="rag_real_100k")
    parser.add_argument("--per-set", type=int, default=20)
    args = parser.parse_args()
    settings = load_settings()
    k1, b = settings.bm25_k1, settings.bm25_b
    engine = store.engine_for(bench.server_url(settings), args.database, settings)
    db = Database(engine)
    with db.transaction() as session:
        preset = load_preset(session, bench.PRESET)
    rows = []
    skipped = 0
    for question in real_text.real_queries(DATASETS, per_set=args.per_set, seed=7):
        request = retrievers.search_request(
            settings, preset, None, retrievers.QueryParts.of(question), vector_weight=0.0, keyword_weight=1.0
        )
        with db.transaction() as session:
            budgeted = hybrid_search(session, dataclasses.replace(request, candidate_k=TOP_K))
        if len(budgeted) < TOP_K:
            skipped += 1
            continue
        theta = min(h.keyword_score or 0.0 for h in budgeted)
        started = time.perf_counter()
        with engine.connect() as conn:
            terms = conn.execute(
                _TERMS, {"c": store.COLLECTION, "q": bm25_text(parse_query(question)), "k1": k1, "b": b}
            ).all()
            slope = terms[0].slope
            bounds = sorted(((t.lexeme, t.weight / (1 + slope * t.min_ratio)) for t in terms), key=lambda x: -x[1])
            sets = sufficient_sets(bounds, theta * (1 - 1e-9))
            if len(sets) > MAX_CLAUSES:
                skipped += 1
                continue
            tsquery = " | ".join("(" + " & ".join("'" + x.replace("'", "''") + "'" for x in s) + ")" for s in sets)
            found = conn.execute(
                _SCORE,
                {
                    "tsq": tsquery, "c": store.COLLECTION, "lexemes": [t.lexeme for t in terms],
                    "weights": [t.weight for t in terms], "base": k1 * (1 - b), "slope": slope,
                },
            ).all()  # fmt: skip
        conjunctive_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        with db.transaction() as session:
            exact = hybrid_search(session, dataclasses.replace(request, bm25_max_postings=0, candidate_k=TOP_K))
        exact_ms = (time.perf_counter() - started) * 1000
        same = np.allclose(sorted(r.score for r in found), sorted(h.keyword_score or 0.0 for h in exact))
        rows.append(
            {
                "conjunctive_ms": conjunctive_ms, "exact_ms": exact_ms, "sets": len(sets),
                "candidates": found[0].candidates if found else 0, "same_scores": int(same),
            }
        )  # fmt: skip
    summary = {k: {p: round(float(np.percentile([r[k] for r in rows], p)), 2) for p in (50, 90, 100)} for k in rows[0]}
    out = {"database": args.database, "queries": len(rows), "skipped": skipped, "summary": summary}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
