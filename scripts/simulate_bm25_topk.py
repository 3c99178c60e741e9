#!/usr/bin/env python3
"""How many postings an exact BM25 top 20 with safe pruning would read on real text (issue 27 point 2).

A simulation before building it: for each real question, read its lexemes' whole posting lists from a
database built by ``scripts/bench_bm25_real.py`` (in ``ix_chunk_terms_impact``'s order, ``len / tf``),
then run a threshold algorithm over them in Python and count what it reads. Per lexeme of weight ``w``
(idf * (k1 + 1)), every posting at or after ratio ``r = len / tf`` scores at most ``w / (1 + slope * r)``
(BM25's ``base / tf`` term dropped, so a true bound). Each round reads the next ``--block`` postings of
every list not exhausted and adds them to each chunk's read score (a lower bound of its score; its upper
bound adds the bounds of the lists it was not read in). Reading stops when the sum of the lists' bounds
(the most an unseen chunk can score) is below the 20th best lower bound and at most ``--completions``
seen chunks can still reach it; those are completed exactly (a primary-key probe each in SQL: a "random
access") and the best 20 returned: the exact top 20 (checked here against the exact ranking). Reported:
postings read in order, random accesses, rounds, against the postings an exact arm reads and the 6,000 of
the default budget; and what MaxScore and conjunctive candidates would read (``_pruned_by_theta``).

    RAG_DATA_DIR=/work/bench1m .venv/bin/python scripts/simulate_bm25_topk.py --database rag_real_1m
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
from pathlib import Path

import bench
import numpy as np
from bench_lib import real_text, store
from sqlalchemy import text

from rag_service.config import load_settings
from rag_service.retrieve.query import bm25_text, parse_query

DATASETS = bench.REPO.parent / "shared" / "datasets"
TOP_K = 20
#: one lexeme's postings in impact order: its weight, chunk ids, BM25 scores and ``len / tf`` ratios
Postings = tuple[float, np.ndarray, np.ndarray, np.ndarray]


def _lists(conn, collection: str, query: str, k1: float, b: float) -> tuple[list[Postings], float]:  # type: ignore[no-untyped-def]
    """Per lexeme of ``query``: its weight, chunk ids, scores and ratios in impact order; and BM25's ``slope``."""
    stats = conn.execute(
        text("SELECT chunk_count, total_length FROM collection_stats WHERE collection = :c"), {"c": collection}
    ).one()
    n, avglen = float(stats[0]), float(stats[1]) / float(stats[0])
    base, slope = k1 * (1 - b), k1 * b / avglen
    lexemes = conn.execute(
        text(
            "SELECT lexeme, doc_freq FROM lexeme_stats WHERE collection = :c "
            "AND lexeme = ANY(tsvector_to_array(to_tsvector('english', :q)))"
        ),
        {"c": collection, "q": query},
    ).all()
    out = []
    for lexeme, df in lexemes:
        weight = math.log(1 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1)
        rows = conn.execute(
            text(
                "SELECT chunk_id, tf, doc_len FROM chunk_terms WHERE collection = :c AND lexeme = :l "
                "ORDER BY CAST(doc_len AS DOUBLE PRECISION) / CAST(tf AS DOUBLE PRECISION), chunk_id"
            ),
            {"c": collection, "l": lexeme},
        ).all()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        tf = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        length = np.fromiter((r[2] for r in rows), dtype=np.float64, count=len(rows))
        out.append((weight, ids, weight * tf / (tf + base + slope * length), length / tf))
    return out, slope


def _exact(lists: list[Postings]) -> tuple[dict[int, float], dict[int, int]]:
    """Each chunk's exact score, and which lexemes it holds (bit j: list j)."""
    full: dict[int, float] = {}
    held: dict[int, int] = {}
    for j, (_, ids, scores, _) in enumerate(lists):
        for chunk, score in zip(ids.tolist(), scores.tolist(), strict=True):
            full[chunk] = full.get(chunk, 0.0) + score
            held[chunk] = held.get(chunk, 0) | (1 << j)
    return full, held


def _threshold(
    lists: list[Postings], full: dict[int, float], slope: float, block: int, completions: int, by_bound: bool
) -> dict[str, int]:
    """Read blocks of every list (``by_bound``: ``block`` postings a round shared in proportion to the lists'
    current bounds, so the high-idf lists go first); stop when no unseen chunk can reach the 20th best lower bound and at most
    ``completions`` seen chunks still can (their upper bound reaches it); complete those exactly (``full``:
    the exact scores, to check the result)."""
    exact = sorted(full.values(), reverse=True)[:TOP_K]
    positions = [0] * len(lists)
    lower: dict[int, float] = {}  # the score read so far of each chunk seen
    read_in: dict[int, int] = {}  # bit j: chunk read in list j
    rounds = read = 0
    bounds = [weight / (1 + slope * ratios[0]) for weight, _, _, ratios in lists]
    while True:
        rounds += 1
        shares = [b / sum(bounds) * len(lists) if by_bound and sum(bounds) > 0 else 1.0 for b in bounds]
        for j, (_, ids, scores, _) in enumerate(lists):
            stop = min(positions[j] + max(1, round(block * shares[j])), len(ids))
            for chunk, score in zip(
                ids[positions[j] : stop].tolist(), scores[positions[j] : stop].tolist(), strict=True
            ):
                lower[chunk] = lower.get(chunk, 0.0) + score
                read_in[chunk] = read_in.get(chunk, 0) | (1 << j)
            read += stop - positions[j]
            positions[j] = stop
        bounds = [
            weight / (1 + slope * ratios[positions[j]]) if positions[j] < len(ids) else 0.0
            for j, (weight, ids, _, ratios) in enumerate(lists)
        ]
        unseen = sum(bounds)
        kth = heapq.nlargest(TOP_K, lower.values())[-1] if len(lower) >= TOP_K else 0.0
        if unseen <= kth or all(p == len(ls[1]) for p, ls in zip(positions, lists, strict=True)):
            candidates = [
                c
                for c, low in lower.items()
                if low + sum(b for j, b in enumerate(bounds) if not read_in[c] >> j & 1) >= kth
            ]
            if len(candidates) <= completions or unseen == 0:
                break
    found = sorted((full[c] for c in candidates), reverse=True)[:TOP_K]
    assert np.allclose(found, exact), "the pruned top 20 is not the exact one"
    return {
        "read": read,
        "random_access": len(candidates),
        "rounds": rounds,
        "exact_reads": sum(len(x[1]) for x in lists),
    }


def _pruned_by_theta(lists: list[Postings], full: dict[int, float], held: dict[int, int]) -> dict[str, int]:
    """Two other safe prunings, given the exact 20th score ``theta`` (their best case: a real run only has a
    lower bound of it), with each lexeme's bound ``U`` (its best posting's score):

    - *MaxScore*: the most frequent lexemes whose bounds sum below theta are skipped ("non-essential"); the
      others are read whole, and every chunk seen there whose read score plus the skipped lexemes' bounds
      reaches theta is completed by a primary-key probe (``maxscore_read``, ``maxscore_completions``).
    - *Conjunctive candidates*: only a chunk whose lexemes' bounds sum to theta can reach it, i.e. one that
      holds every lexeme of some "sufficient" subset: a GIN query of ANDs joined by OR
      (``conjunctive_candidates``), each candidate then scored by a probe.
    """
    ranked = sorted(full.values(), reverse=True)
    theta = ranked[TOP_K - 1] if len(ranked) >= TOP_K else 0.0
    bound = [float(scores.max()) for _, _, scores, _ in lists]
    skipped: list[int] = []
    skipped_bound = 0.0
    for j in sorted(range(len(lists)), key=lambda j: -len(lists[j][1])):
        if skipped_bound + bound[j] >= theta:
            break
        skipped.append(j)
        skipped_bound += bound[j]
    read: dict[int, float] = {}
    for j, (_, ids, scores, _) in enumerate(lists):
        if j not in skipped:
            for chunk, score in zip(ids.tolist(), scores.tolist(), strict=True):
                read[chunk] = read.get(chunk, 0.0) + score
    sufficient: dict[int, bool] = {}
    for mask in set(held.values()):
        sufficient[mask] = sum(b for j, b in enumerate(bound) if mask >> j & 1) >= theta
    return {
        "maxscore_read": sum(len(lists[j][1]) for j in range(len(lists)) if j not in skipped),
        "maxscore_completions": sum(1 for score in read.values() if score + skipped_bound >= theta),
        "conjunctive_candidates": sum(1 for mask in held.values() if sufficient[mask]),
        "chunks_with_a_lexeme": len(full),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="rag_real_1m")
    parser.add_argument("--per-set", type=int, default=40)
    parser.add_argument("--block", type=int, default=1000)
    parser.add_argument("--completions", type=int, default=100, help="chunks completed by primary-key probes")
    parser.add_argument("--even", action="store_true", help="read the same block from every list each round")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings = load_settings()
    engine = store.engine_for(bench.server_url(settings), args.database, settings)
    queries = real_text.real_queries(DATASETS, per_set=args.per_set, seed=7)
    per_query = []
    with engine.connect() as conn:
        for q in queries:
            lists, slope = _lists(conn, store.COLLECTION, bm25_text(parse_query(q)), settings.bm25_k1, settings.bm25_b)
            if lists:
                full, held = _exact(lists)
                threshold = _threshold(lists, full, slope, args.block, args.completions, not args.even)
                per_query.append({**threshold, **_pruned_by_theta(lists, full, held)})
    summary = {
        key: {p: float(np.percentile([r[key] for r in per_query], p)) for p in (50, 90, 95, 100)}
        for key in per_query[0]
    }
    out = {
        "database": args.database,
        "block": args.block,
        "completions": args.completions,
        "allocation": "even" if args.even else "by bound",
        "queries": len(per_query),
        "summary": summary,
    }
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
