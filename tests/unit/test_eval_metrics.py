"""Our measures against pytrec_eval (trec_eval) and ir_measures, per query, to 1e-9."""

from __future__ import annotations

import math
import random

import ir_measures
import pytest
import pytrec_eval
from ir_measures import RR

from rag_service.errors import ConfigurationError
from rag_service.evaluation import (
    LatencyRecorder,
    evaluate_per_query,
    evaluate_run,
    load_beir,
    mrr_at_k,
    ndcg_at_k,
    rank_documents_by_best_chunk,
    rank_scores,
    recall_at_k,
)
from tests.shared_data import scifact_dir

TOL = 1e-9
_TREC_MEASURES = {"ndcg_cut_10", "recall_10", "recall_100", "recip_rank"}

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


def _pytrec_per_query(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """pytrec_eval's values under our names; MRR@10 from trec_eval's uncut recip_rank by hand."""
    raw = pytrec_eval.RelevanceEvaluator(qrels, _TREC_MEASURES).evaluate(run)
    result = {}
    for qid, values in raw.items():
        rr = values["recip_rank"]
        first_rank = round(1 / rr) if rr > 0 else math.inf
        result[qid] = {
            "ndcg@10": values["ndcg_cut_10"],
            "recall@10": values["recall_10"],
            "recall@100": values["recall_100"],
            "mrr@10": rr if first_rank <= 10 else 0.0,
        }
    return result


def _assert_agrees(run: Run, qrels: Qrels) -> None:
    ours = evaluate_per_query(run, qrels)
    theirs = _pytrec_per_query(run, qrels)
    assert ours.keys() == theirs.keys() == qrels.keys()
    for qid in qrels:
        for name, value in theirs[qid].items():
            assert ours[qid][name] == pytest.approx(value, abs=TOL), (qid, name)


# --- hand examples ---------------------------------------------------------------------------------


def test_graded_ndcg_by_hand_and_pytrec_eval() -> None:
    qrels = {"q": {"d1": 2, "d2": 1, "d3": 0, "d4": 3}}
    run = {"q": {"d1": 0.9, "d3": 0.8, "d2": 0.7, "d9": 0.6, "d4": 0.5}}
    dcg = 2 / math.log2(2) + 1 / math.log2(4) + 3 / math.log2(6)
    idcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    values = evaluate_per_query(run, qrels)["q"]
    assert values["ndcg@10"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert values["recall@10"] == 1.0
    assert values["mrr@10"] == 1.0
    _assert_agrees(run, qrels)


def test_ties_break_by_doc_id_descending_like_trec_eval() -> None:
    scores = {"a": 1.0, "b": 1.0, "B": 1.0, "a10": 1.0, "a9": 1.0, "z": 0.5, "top": 2.0}
    assert [d for d, _ in rank_scores(scores)] == ["top", "b", "a9", "a10", "a", "B", "z"]
    for relevant in scores:
        _assert_agrees({"q": scores}, {"q": {relevant: 1}})


def test_scores_equal_as_float32_are_ties_as_in_trec_eval() -> None:
    near = {"a": 1.0 + 1e-9, "b": 1.0}  # same float32: tie, so "b" (larger id) first
    apart = {"a": 1.0 + 1e-6, "b": 1.0}
    assert [d for d, _ in rank_scores(near)] == ["b", "a"]
    assert [d for d, _ in rank_scores(apart)] == ["a", "b"]
    assert rank_scores(near)[1] == ("a", 1.0 + 1e-9)  # original score kept
    for run in (near, apart):
        _assert_agrees({"q": run}, {"q": {"a": 1}})


def test_unjudged_zero_and_negative_grades_are_not_relevant() -> None:
    qrels = {"q": {"a": 2, "b": -1, "c": 1, "d": 0}, "none": {"x": 0}}
    run = {"q": {"b": 3.0, "d": 2.5, "u": 2.2, "a": 2.0, "c": 1.0}, "none": {"x": 1.0}}
    values = evaluate_per_query(run, qrels)
    assert values["q"]["mrr@10"] == pytest.approx(1 / 4)
    assert values["none"] == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    _assert_agrees(run, qrels)


def test_cutoffs_and_short_or_empty_rankings() -> None:
    qrels = {"q": {f"r{i}": 1 for i in range(3)}, "empty": {"r0": 1}}
    run: Run = {"q": {f"n{i:02d}": 100.0 - i for i in range(10)} | {"r0": 50.0, "r1": 1.0}, "empty": {}}
    values = evaluate_per_query(run, qrels)
    assert values["q"]["recall@10"] == 0.0
    assert values["q"]["recall@100"] == pytest.approx(2 / 3)
    assert values["q"]["mrr@10"] == 0.0  # first relevant at rank 11: trec_eval's recip_rank says 1/11
    assert values["empty"]["ndcg@10"] == 0.0
    _assert_agrees(run, qrels)


def test_single_query_functions() -> None:
    grades = {"a": 1, "b": 3}
    assert ndcg_at_k(["b", "a"], grades, k=10) == 1.0
    assert ndcg_at_k(["a"], grades, k=1) == pytest.approx(1 / 3)
    assert recall_at_k(["x", "a"], grades, k=1) == 0.0
    assert mrr_at_k(["x", "a"], grades, k=2) == 0.5
    with pytest.raises(ConfigurationError, match="k"):
        recall_at_k(["a"], grades, k=0)


def test_mean_counts_queries_missing_from_the_run_as_zero() -> None:
    qrels = {"hit": {"a": 1}, "missing": {"b": 1}}
    run = {"hit": {"a": 1.0}, "not-judged": {"a": 1.0}}
    ours = evaluate_run(run, qrels)
    assert ours == {"ndcg@10": 0.5, "recall@10": 0.5, "recall@100": 0.5, "mrr@10": 0.5}
    pytrec = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    assert pytrec.keys() == {"hit"}  # pytrec_eval skips the missing query; its mean would be 1.0


def test_measures_are_configurable_and_validated() -> None:
    run, qrels = {"q": {"a": 1.0, "b": 0.5}}, {"q": {"b": 1}}
    assert evaluate_run(run, qrels, measures=["mrr@1", "ndcg@5"]) == {
        "mrr@1": 0.0,
        "ndcg@5": pytest.approx(1 / math.log2(3)),
    }
    for bad in ("map@10", "ndcg", "ndcg@0", "ndcg@x", "recall@²"):
        with pytest.raises(ConfigurationError, match="unknown measure"):
            evaluate_run(run, qrels, measures=[bad])
    with pytest.raises(ConfigurationError, match="qrels are empty"):
        evaluate_run(run, {})
    with pytest.raises(ConfigurationError, match="NaN"):
        evaluate_run({"q": {"a": math.nan}}, qrels)


# --- the real SciFact qrels ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scifact_random_runs() -> tuple[Qrels, Run, Run]:
    """Test qrels; a run with many ties (scores rounded to 0.1) and a tie-free one; fixed seed."""
    dataset = load_beir(scifact_dir(), split="test")
    corpus_ids = sorted(dataset.corpus)
    rng = random.Random(20240601)
    tied: Run = {}
    distinct: Run = {}
    for qid, grades in dataset.qrels.items():
        doc_ids = list(dict.fromkeys([*grades, *rng.sample(corpus_ids, 200)]))
        tied[qid] = {doc_id: round(rng.random(), 1) for doc_id in doc_ids}
        ranks = rng.sample(range(1, len(doc_ids) + 1), len(doc_ids))
        distinct[qid] = {doc_id: rank / len(doc_ids) for doc_id, rank in zip(doc_ids, ranks, strict=True)}
    return dataset.qrels, tied, distinct


def test_agrees_with_pytrec_eval_on_scifact_random_runs(scifact_random_runs: tuple[Qrels, Run, Run]) -> None:
    qrels, tied, distinct = scifact_random_runs
    for run in (tied, distinct):
        _assert_agrees(run, qrels)
        theirs = _pytrec_per_query(run, qrels)
        means = evaluate_run(run, qrels)
        for name, value in means.items():
            expected = math.fsum(values[name] for values in theirs.values()) / len(theirs)
            assert value == pytest.approx(expected, abs=TOL)


def test_mrr_agrees_with_ir_measures_rr10_without_ties(scifact_random_runs: tuple[Qrels, Run, Run]) -> None:
    # ir_measures computes RR@10 with its msmarco provider, which breaks ties by doc id *ascending*
    # (unlike trec_eval), so the comparison uses the tie-free run.
    qrels, _, distinct = scifact_random_runs
    ours = evaluate_per_query(distinct, qrels, measures=["mrr@10"])
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([RR @ 10], qrels, distinct)}
    assert theirs.keys() == ours.keys()
    for qid, value in theirs.items():
        assert ours[qid]["mrr@10"] == pytest.approx(value, abs=TOL)
    assert any(value > 0 for value in theirs.values())


# --- chunk hits to documents, latency ---------------------------------------------------------------


def test_rank_documents_by_best_chunk() -> None:
    hits = [("a", 0.5), ("b", 0.9), ("a", 0.9), ("c", 0.7), ("b", 0.1), ("d", 0.7)]
    assert rank_documents_by_best_chunk(hits, top_k=10) == [("b", 0.9), ("a", 0.9), ("c", 0.7), ("d", 0.7)]
    assert rank_documents_by_best_chunk(hits, top_k=2) == [("b", 0.9), ("a", 0.9)]
    assert rank_documents_by_best_chunk([], top_k=3) == []
    with pytest.raises(ConfigurationError, match="top_k"):
        rank_documents_by_best_chunk(hits, top_k=0)


def test_latency_summary_uses_linear_interpolation() -> None:
    recorder = LatencyRecorder()
    for ms in (10.0, 20.0, 30.0, 40.0):
        recorder.record("search", ms)
    recorder.record("embed", 5.0)
    with recorder.measure("block"):
        pass
    summary = recorder.summary()
    assert list(summary) == ["search", "embed", "block"]
    assert summary["search"] == {"p50": 25.0, "p95": pytest.approx(38.5), "mean": 25.0, "n": 4}
    assert summary["embed"] == {"p50": 5.0, "p95": 5.0, "mean": 5.0, "n": 1}
    assert summary["block"]["n"] == 1 and summary["block"]["p50"] >= 0
    assert recorder.samples("search") == [10.0, 20.0, 30.0, 40.0]
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ConfigurationError, match="search"):
            recorder.record("search", bad)
