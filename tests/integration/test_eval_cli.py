"""`rag eval` on a tiny BEIR dataset: metrics as JSON, a TREC run file, and no re-embedding on rerun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_service.evaluation.trec import read_trec_run
from tests.integration.test_cli import cli_env, rag  # noqa: F401  (fixture and helper)

pytestmark = pytest.mark.multiprocess

CORPUS = {
    "d1": ("Backups", "Nightly backups are restored with pg_restore into a fresh cluster."),
    "d2": ("Replication", "A streaming replica follows the primary and can be promoted on failover."),
    "d3": ("Vectors", "HNSW indexes answer nearest-neighbour queries over embeddings quickly."),
    "d4": ("Keywords", "BM25 ranks documents by term frequency and inverse document frequency."),
}
QUERIES = {"q1": "how are backups restored", "q2": "promote a replica on failover", "q3": "rank by term frequency"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d4", 2)]


def make_dataset(root: Path) -> Path:
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "title": t, "text": x}) for k, (t, x) in CORPUS.items()) + "\n"
    )
    (root / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": v}) for k, v in QUERIES.items()) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS)
    )
    return root


def test_eval_json_run_file_and_reuse(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    dataset = make_dataset(tmp_path / "tiny")
    run_file = tmp_path / "run.trec"
    first = rag(cli_env, "eval", str(dataset), "--no-rerank", "--json", "--quiet", "--run-out", str(run_file))
    assert first.returncode == 0, first.stderr
    payload = json.loads(first.stdout)
    assert set(payload["metrics"]) == {"ndcg@10", "recall@10", "recall@100", "mrr@10"}
    assert payload["queries"] == 3 and payload["ingest"]["added"] == 4
    assert payload["metrics"]["recall@10"] == 1.0  # 4 documents: everything is in the top 10
    assert set(payload["latency_ms"]) >= {"embedding", "retrieval", "total"}
    run = read_trec_run(run_file)
    assert set(run) == {"q1", "q2", "q3"} and max(run["q1"], key=run["q1"].get) == "d1"

    second = rag(cli_env, "eval", str(dataset), "--retriever", "fulltext", "--no-rerank", "--json", "--quiet")
    again = json.loads(second.stdout)
    assert again["ingest"]["unchanged"] == 4 and again["ingest"]["chunks_embedded"] == 0
    assert again["config"]["retriever"] == "fulltext"


def test_eval_errors_are_one_line(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    missing = rag(cli_env, "eval", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1
    dataset = make_dataset(tmp_path / "tiny")
    bad_split = rag(cli_env, "eval", str(dataset), "--split", "dev")
    assert bad_split.returncode == 1 and "test" in bad_split.stderr
    bad_set = rag(cli_env, "eval", str(dataset), "--set", "nonsense")
    assert bad_set.returncode == 2 and "key=value" in bad_set.stderr  # a usage error (test_cli_choices)


def test_a_run_file_or_ids_it_cannot_hold_fail_before_the_dataset_is_indexed(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    dataset = make_dataset(tmp_path / "tiny")
    unwritable = rag(cli_env, "eval", str(dataset), "--quiet", "--run-out", str(tmp_path / "missing" / "x.run"))
    assert unwritable.returncode == 1 and unwritable.stderr.strip() == (
        f"error: cannot write run file {tmp_path / 'missing' / 'x.run'} (No such file or directory); "
        "choose a writable path"
    )
    queries = dataset / "queries.jsonl"
    queries.write_text(queries.read_text().replace('"q1"', '"q 1"'))
    (dataset / "qrels" / "test.tsv").write_text("q 1\td1\t1\n")
    spaced = rag(cli_env, "eval", str(dataset), "--quiet", "--run-out", str(tmp_path / "x.run"))
    assert spaced.returncode == 1 and "query id 'q 1'" in spaced.stderr and "--run-out" in spaced.stderr
    listed = rag(cli_env, "db", "status")
    assert "collection:" not in listed.stdout, "nothing was indexed before the errors"
