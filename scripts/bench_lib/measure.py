"""The timing loop and the SQL-side evidence (EXPLAIN, EXPLAIN ANALYZE, match counts) for one corpus size."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlalchemy import Engine, text
from tqdm import tqdm

from bench_lib import corpus as synth
from bench_lib.retrievers import RetrieverFn, Workload
from bench_lib.store import shorten_vectors
from rag_service.db.database import Database
from rag_service.db.search import SearchRequest, explain
from rag_service.evaluation.latency import LatencyRecorder


def time_retrievers(
    retrievers: Mapping[str, RetrieverFn], *, warmup: int, queries: int, desc: str, seed: int = 0
) -> tuple[LatencyRecorder, dict[str, list[list[int]]], dict[str, list[int]]]:
    """Time every retriever on queries ``warmup .. warmup + queries - 1`` after ``warmup`` untimed ones.

    Retrievers are interleaved, in a fresh random order at each step, so a burst of load from
    elsewhere on a shared machine slows every retriever alike rather than one block of runs, and no
    retriever always runs right after the same one (with a rotated order, the hybrid statement had
    followed the 1-second parallel ``ts_rank_cd`` query in 185 of 200 steps). Each retriever walks the queries in its own random order: two retrievers never
    run the same query back to back, so none finds the pages of its query already cached by the one
    before it.

    Returns the latencies, each retriever's results in query order, and the query index of each
    recorded sample (``recorder.samples(key)[j]`` is query ``order[key][j]``).
    """
    keys = list(retrievers)
    for i in tqdm(range(warmup), desc=f"{desc} warm-up", unit="query", leave=False):
        for key in keys:
            retrievers[key](i)
    rng = np.random.default_rng(seed)
    order = {key: (warmup + rng.permutation(queries)).tolist() for key in keys}
    recorder = LatencyRecorder()
    found: dict[str, dict[int, list[int]]] = {key: {} for key in keys}
    for step in tqdm(range(queries), desc=f"{desc} queries", unit="query"):
        for k in rng.permutation(len(keys)).tolist():
            key = keys[k]
            i = order[key][step]
            started = time.perf_counter()
            ids = retrievers[key](i)
            recorder.record(key, (time.perf_counter() - started) * 1000.0)
            found[key][i] = ids
    results = {key: [found[key][i] for i in range(warmup, warmup + queries)] for key in keys}
    return recorder, results, order


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded (recorded beside every timing)."""
    return [round(x, 2) for x in os.getloadavg()]


def memory_retouch_ms(idle_s: float = 1.0, megabytes: int = 50) -> float:
    """Milliseconds to read one byte of each 4 kB page of ``megabytes`` again after ``idle_s`` of sleep.

    A probe of the host, not of the service: on the VM of session 49 this took 1-11 ms at some hours and 67-73 ms at
    others (~5.5 us a page), and a query after a 3 s pause cost 90 ms at the first and 390-470 ms at the second
    against ~25 back to back. Recorded beside the latencies so that runs compare only within one state.
    """
    pages = np.ones(megabytes * 1_000_000, dtype=np.uint8)
    pages[::4096] += 1  # every page touched, so none is first touched in the timed read
    time.sleep(idle_s)
    started = time.perf_counter()
    int(pages[::4096].sum())
    return round((time.perf_counter() - started) * 1000, 2)


def latency_summary(recorder: LatencyRecorder, digits: int = 2) -> dict[str, dict[str, float]]:
    """Each retriever's p50/p95/mean/n in ms, rounded for the JSON reports."""
    return {key: {stat: round(v, digits) for stat, v in stats.items()} for key, stats in recorder.summary().items()}


def explain_analyze(database: Database, request: SearchRequest) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of the hybrid statement for ``request``, vectors shortened."""
    with database.transaction() as session:
        return shorten_vectors(explain(session, request, analyze=True))


def make_workload(
    engine: Engine, corpus: synth.Corpus, words: list[str], *, count: int, seed: int
) -> tuple[Workload, list[dict[str, Any]]]:
    """The benchmark's queries on ``corpus``: typical ones and ones of the 20 most frequent terms (returned too)."""
    terms = frequent_terms(engine, words)
    work = Workload(
        queries=synth.make_queries(corpus, count=count, seed=seed + 1),
        frequent=synth.make_frequent_queries([t["word"] for t in terms], corpus, count=count, seed=seed + 2),
    )
    return work, terms


def frequent_terms(engine: Engine, words: list[str], *, count: int = 20) -> list[dict[str, Any]]:
    """The ``count`` most frequent vocabulary words that survive the english config, one per lexeme.

    Each comes with the share of chunks whose tsvector contains it.
    """
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT w, array_to_string(tsvector_to_array(to_tsvector('english', w)), ' ') "
                "FROM unnest(CAST(:words AS text[])) WITH ORDINALITY AS t(w, i) ORDER BY i"
            ),
            {"words": words[:500]},
        ).all()
        picked: dict[str, str] = {}
        for word, lexeme in rows:
            if lexeme and lexeme not in picked:
                picked[lexeme] = word
            if len(picked) == count:
                break
        total = conn.execute(text("SELECT count(*) FROM document_chunks")).scalar_one()
        out = []
        for lexeme, word in picked.items():
            matches = conn.execute(
                text("SELECT count(*) FROM document_chunks WHERE content_tsv @@ plainto_tsquery('english', :w)"),
                {"w": word},
            ).scalar_one()
            out.append({"word": word, "lexeme": lexeme, "chunk_share": round(matches / total, 4)})
    return out


def keyword_match_counts(engine: Engine, any_terms: list[str]) -> dict[str, float]:
    """How many chunks the keyword arm's tsquery matches (and must rank) for these queries."""
    counts: list[int] = []
    with engine.connect() as conn:
        total = conn.execute(text("SELECT count(*) FROM document_chunks")).scalar_one()
        for terms in any_terms:
            counts.append(
                conn.execute(
                    text(
                        "SELECT count(*) FROM document_chunks "
                        "WHERE content_tsv @@ websearch_to_tsquery('english', :terms)"
                    ),
                    {"terms": terms},
                ).scalar_one()
            )
    counts.sort()
    return {
        "queries": len(counts),
        "median": float(counts[len(counts) // 2]),
        "p95": float(counts[min(len(counts) - 1, int(0.95 * len(counts)))]),
        "max": float(counts[-1]),
        "median_share": round(counts[len(counts) // 2] / total, 4),
    }


def overlap_at_k(found: list[list[int]], truth: list[list[int]]) -> float:
    """Mean share of ``truth``'s ids that ``found`` returned (recall of an approximate search at k)."""
    shares = [len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True) if t]
    return round(sum(shares) / len(shares), 4) if shares else 0.0


#: similarity tolerance for "as near as the exact k-th" (float32 rounding of pgvector against numpy)
TIE = 1e-5


def recall_with_ties(found: list[list[int]], truth: list[list[int]], vectors: np.ndarray, queries: np.ndarray) -> float:
    """Recall at k counting a returned chunk as right when it is at least as similar as the exact k-th (within
    ``TIE``): ann-benchmarks' rule. With exact duplicates in a corpus (identical chunks, identical vectors), which of
    a tied group makes the top k is arbitrary, and ``overlap_at_k`` counts a perfect search's tie-break as a miss.
    ``queries[i]`` is the vector of ``found[i]`` and ``truth[i]``'s question; ids are 1-based rows of ``vectors``."""
    shares = []
    for f, t, q in zip(found, truth, queries, strict=True):
        if not t:
            continue
        kth = min(float(vectors[j - 1] @ q) for j in t)
        shares.append(sum(float(vectors[j - 1] @ q) >= kth - TIE for j in f[: len(t)]) / len(t))
    return round(sum(shares) / len(shares), 4) if shares else 0.0


def exact_top_k_other_tie_break(vectors: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """Exact top ``k`` (1-based ids) with ties broken the other way (the higher id first): its ``overlap_at_k`` with
    ``retrievers.numpy_exact`` is the strict recall a second exact search gets, the ceiling of that measure."""
    found = []
    for q in queries:
        scores = vectors @ q
        room = min(len(scores), k * 4)  # room for a tied group across the k-th place
        top = np.argpartition(-scores, room - 1)[:room]
        order = np.lexsort((-top, -scores[top]))[:k]
        found.append([int(j) + 1 for j in top[order]])
    return found


def hit_rate(found: list[list[int]], targets: list[int]) -> float:
    """Share of queries whose source chunk is among the returned ids."""
    hits = [t in f for f, t in zip(found, targets, strict=True)]
    return round(sum(hits) / len(hits), 4) if hits else 0.0
