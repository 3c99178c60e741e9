"""Retrieval measures in pure Python that agree with trec_eval / pytrec_eval per query.

Conventions (those of trec_eval, hence of pytrec_eval, BEIR and the published baselines):

- **Ranking.** A run gives each retrieved document a score; documents are ranked by score, highest
  first, and ties are broken by document id in *descending* string order (trec_eval's
  ``comp_sim_docno``). trec_eval stores scores as 32-bit floats, so scores that round to the same
  float32 are ties too; :func:`rank_scores` does the same. The rank column of a run file is ignored.
- **Relevance.** A document is relevant when its qrels grade is ``> 0``; unjudged documents and grades
  ``<= 0`` count as not relevant.
- **nDCG@k**: DCG over the top ``k`` with linear gain (the grade) and discount ``log2(rank + 1)``,
  divided by the DCG of the ideal ranking of the query's positive grades; 0 when there are none.
- **Recall@k**: relevant documents in the top ``k`` over all relevant documents of the query (0 if none).
- **MRR@k**: ``1 / rank`` of the first relevant document within the top ``k``, else 0. (trec_eval's
  ``recip_rank`` has no cut-off; MRR@k equals it when that rank is ``<= k``.)

Averaging (:func:`evaluate_run`) is over **every query of the qrels**: a query missing from the run
scores 0 on every measure. pytrec_eval instead skips such queries, and BEIR averages over the queries
present in its results; both inflate the mean of a run that fails on some queries, so we count them.
Queries of the run that have no qrels are ignored, as trec_eval does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from rag_service.errors import ConfigurationError

__all__ = [
    "DEFAULT_MEASURES",
    "Qrels",
    "Run",
    "evaluate_per_query",
    "evaluate_run",
    "mrr_at_k",
    "ndcg_at_k",
    "rank_scores",
    "recall_at_k",
]

#: query id -> document id -> retrieval score (higher is better)
Run = Mapping[str, Mapping[str, float]]
#: query id -> document id -> integer relevance grade (``> 0`` is relevant)
Qrels = Mapping[str, Mapping[str, int]]

DEFAULT_MEASURES: tuple[str, ...] = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def rank_scores(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """Return ``(doc_id, score)`` pairs in trec_eval's order: float32 score desc, then doc id desc.

    The returned scores are the original ones; only the comparison uses their float32 rounding.
    """
    doc_ids = list(scores)
    values = np.fromiter((scores[doc_id] for doc_id in doc_ids), dtype=np.float64, count=len(doc_ids))
    nan = np.flatnonzero(np.isnan(values))
    if nan.size:
        bad = doc_ids[nan[0]]
        raise ConfigurationError(f"score of document {bad!r} is NaN; give every document a number")
    with np.errstate(over="ignore"):
        keys: list[float] = values.astype(np.float32).tolist()
    order = sorted(range(len(doc_ids)), key=lambda i: (keys[i], doc_ids[i]), reverse=True)
    return [(doc_ids[i], float(values[i])) for i in order]


def ndcg_at_k(ranking: Sequence[str], grades: Mapping[str, int], *, k: int) -> float:
    """nDCG@k of ``ranking`` (doc ids, best first) against one query's ``grades``; linear gain."""
    _check_k(k)
    dcg = 0.0
    for index, doc_id in enumerate(ranking[:k]):
        gain = grades.get(doc_id, 0)
        if gain > 0:
            dcg += gain / math.log2(index + 2)
    ideal = sorted((gain for gain in grades.values() if gain > 0), reverse=True)[:k]
    idcg = 0.0
    for index, gain in enumerate(ideal):
        idcg += gain / math.log2(index + 2)
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], grades: Mapping[str, int], *, k: int) -> float:
    """Share of the query's relevant documents (grade > 0) found in the top ``k`` of ``ranking``."""
    _check_k(k)
    relevant = sum(1 for gain in grades.values() if gain > 0)
    if relevant == 0:
        return 0.0
    found = sum(1 for doc_id in ranking[:k] if grades.get(doc_id, 0) > 0)
    return found / relevant


def mrr_at_k(ranking: Sequence[str], grades: Mapping[str, int], *, k: int) -> float:
    """Reciprocal rank of the first relevant document (grade > 0) within the top ``k``, else 0."""
    _check_k(k)
    for rank, doc_id in enumerate(ranking[:k], start=1):
        if grades.get(doc_id, 0) > 0:
            return 1.0 / rank
    return 0.0


class _Measure(Protocol):
    def __call__(self, ranking: Sequence[str], grades: Mapping[str, int], *, k: int) -> float: ...


_MEASURES: dict[str, _Measure] = {"ndcg": ndcg_at_k, "recall": recall_at_k, "mrr": mrr_at_k}


def evaluate_per_query(
    run: Run, qrels: Qrels, *, measures: Sequence[str] = DEFAULT_MEASURES
) -> dict[str, dict[str, float]]:
    """Per-query values: ``{qid: {measure: value}}`` for every query of ``qrels`` (missing from run: 0).

    ``measures`` are names ``ndcg@K``, ``recall@K`` or ``mrr@K``; the inner keys are those names.
    """
    parsed = [(name, *_parse_measure(name)) for name in measures]
    if not parsed:
        raise ConfigurationError("measures is empty; name at least one, e.g. 'ndcg@10'")
    results: dict[str, dict[str, float]] = {}
    for qid, grades in qrels.items():
        ranking = [doc_id for doc_id, _ in rank_scores(run.get(qid, {}))]
        results[qid] = {name: measure(ranking, grades, k=k) for name, measure, k in parsed}
    return results


def evaluate_run(run: Run, qrels: Qrels, *, measures: Sequence[str] = DEFAULT_MEASURES) -> dict[str, float]:
    """Mean of each measure over all queries of ``qrels``, e.g. ``{"ndcg@10": 0.64, ...}``.

    A query of ``qrels`` absent from ``run`` counts 0; see the module docstring for why.
    """
    if not qrels:
        raise ConfigurationError("qrels are empty; evaluate against a split with judged queries")
    per_query = evaluate_per_query(run, qrels, measures=measures)
    return {name: math.fsum(values[name] for values in per_query.values()) / len(per_query) for name in measures}


def _parse_measure(name: str) -> tuple[_Measure, int]:
    family, sep, cutoff = name.partition("@")
    measure = _MEASURES.get(family)
    if measure is None or not sep or not (cutoff.isascii() and cutoff.isdigit()) or int(cutoff) < 1:
        raise ConfigurationError(f"unknown measure {name!r}; use ndcg@K, recall@K or mrr@K with K >= 1")
    return measure, int(cutoff)


def _check_k(k: int) -> None:
    if k < 1:
        raise ConfigurationError(f"k ({k}) must be at least 1")
