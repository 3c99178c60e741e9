"""TREC run files: round trip, trec_eval's order in the rank column, and errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytrec_eval

from rag_service.errors import ConfigurationError, DocumentReadError
from rag_service.evaluation import evaluate_per_query, read_trec_run, write_trec_run


def test_round_trip_keeps_scores_exactly(tmp_path: Path) -> None:
    run = {
        "q1": {"d1": 0.1 + 0.2, "d2": 1e-12, "d3": -2.5, "d4": 0.30000000000000004},
        "q2": {"x": 7.0, "y": math.inf},
        "q3": {},
    }
    path = tmp_path / "run.trec"
    write_trec_run(run, path, tag="hybrid")
    back = read_trec_run(path)
    assert back == {"q1": run["q1"], "q2": run["q2"]}  # a query with no documents has no line
    qrels = {"q1": {"d3": 1}, "q2": {"x": 1}, "q3": {"z": 1}}
    assert evaluate_per_query(back, qrels) == evaluate_per_query(run, qrels)


def test_lines_are_ranked_like_trec_eval(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    write_trec_run({"q": {"a": 1.0, "c": 2.0, "b": 1.0, "a9": 1.0 + 1e-12}}, path, tag="t")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [line.split() for line in lines] == [
        ["q", "Q0", "c", "1", "2.0", "t"],
        ["q", "Q0", "b", "2", "1.0", "t"],
        ["q", "Q0", "a9", "3", repr(1.0 + 1e-12), "t"],  # equal to 1.0 as float32: a tie
        ["q", "Q0", "a", "4", "1.0", "t"],
    ]
    ranks = {line.split()[2]: int(line.split()[3]) for line in lines}
    for doc_id, rank in ranks.items():  # trec_eval re-sorts the file; the rank column agrees with it
        rr = pytrec_eval.RelevanceEvaluator({"q": {doc_id: 1}}, {"recip_rank"}).evaluate(read_trec_run(path))
        assert rr["q"]["recip_rank"] == pytest.approx(1 / rank)


@pytest.mark.parametrize(
    ("run", "tag", "message"),
    [
        ({"q": {"a": 1.0}}, "two words", "tag 'two words'"),
        ({"q": {"a": 1.0}}, "", "tag ''"),
        ({"q 1": {"a": 1.0}}, "t", "query id 'q 1'"),
        ({"q": {"a\tb": 1.0}}, "t", "document id 'a\\\\tb'"),
    ],
)
def test_unwritable_ids_and_tags(tmp_path: Path, run: dict[str, dict[str, float]], tag: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        write_trec_run(run, tmp_path / "run.trec", tag=tag)


def test_unwritable_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot write run file"):
        write_trec_run({"q": {"a": 1.0}}, tmp_path / "no" / "such" / "run.trec", tag="t")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q Q0 d 1 0.5\n", "line 1 has 5 fields"),
        ("q Q0 d 1 0.5 t\n\nq Q0 e one 0.4 t\n", "line 3: rank 'one' or score '0.4' is not a number"),
        ("q Q0 d 1 high t\n", "score 'high' is not a number"),
        ("q Q0 d 1 nan t\n", "line 1: score is NaN"),
        ("q Q0 d 1 0.5 t\nq Q0 d 2 0.4 t\n", "line 2: document 'd' appears twice for query 'q'"),
    ],
)
def test_malformed_run_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "run.trec"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DocumentReadError, match=message):
        read_trec_run(path)


def test_missing_run_file(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError, match="does not exist"):
        read_trec_run(tmp_path / "absent.trec")


def test_a_run_file_path_is_checked_before_the_work_and_leaves_nothing_behind(tmp_path: Path) -> None:
    from rag_service.evaluation.trec import check_run_file

    check_run_file(tmp_path / "new.run")
    assert not (tmp_path / "new.run").exists(), "the check makes no file"
    kept = tmp_path / "kept.run"
    kept.write_text("q1 Q0 d1 1 1.0 tag\n")
    check_run_file(kept)
    assert kept.read_text() == "q1 Q0 d1 1 1.0 tag\n", "an existing file is left as it was until the run is written"
    with pytest.raises(ConfigurationError, match=r"\(it is a folder\); choose a file path"):
        check_run_file(tmp_path)
    with pytest.raises(ConfigurationError, match=r"\(No such file or directory\); choose a writable path"):
        check_run_file(tmp_path / "missing" / "x.run")


def test_ids_a_run_cannot_hold_are_named_with_their_file(tmp_path: Path) -> None:
    from rag_service.evaluation.trec import check_run_ids

    check_run_ids(["q1", "doc#2"], what="query id", source=tmp_path / "queries.jsonl")
    with pytest.raises(ConfigurationError) as raised:
        check_run_ids(["q1", "q 2"], what="query id", source=tmp_path / "queries.jsonl")
    assert str(raised.value).startswith(f"query id 'q 2' in {tmp_path / 'queries.jsonl'} is empty or has whitespace")
