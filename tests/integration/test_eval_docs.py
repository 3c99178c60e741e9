"""`rag eval` on a markdown-documentation set: sections ranked through retrieve(), mapped by match_start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_service.evaluation.trec import read_trec_run
from tests.integration.test_cli import cli_env, rag  # noqa: F401  (fixture and helper)

pytestmark = pytest.mark.multiprocess

PAGES = {
    "backups.md": (
        "# Backups\n\nHow the service keeps copies of its data, where they live and who may read them.\n\n"
        "## Restore\n\nNightly backups are restored with pg_restore into a fresh cluster, then verified.\n\n"
        "## Retention\n\nBackups are kept for thirty days and pruned by a weekly job on the primary.\n"
    ),
    "replicas.md": (
        "Read this first: replicas serve reads only, and writes always go to the primary server.\n\n"
        "# Replication\n\nA streaming replica follows the primary and can be promoted on failover.\n"
    ),
    "guide/search.md": (
        "# Search\n\n## Keywords\n\nBM25 ranks documents by term frequency and inverse document frequency.\n\n"
        "```text\n# not a header: inside a fence\n```\n\n## Vectors\n\nHNSW indexes answer nearest-neighbour queries.\n"
    ),
}
QUERIES = {"q1": "how are nightly backups restored", "q2": "promote a streaming replica", "q3": "BM25 term frequency"}
QRELS = [("q1", "backups.md#2", 1), ("q2", "replicas.md#1", 1), ("q3", "guide/search.md#2", 1)]


def make_docset(root: Path) -> Path:
    for name, text in PAGES.items():
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text(text)
    (root / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": v}) for k, v in QUERIES.items()))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS)
    )
    return root


def test_docset_eval_ranks_sections_through_retrieve(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    dataset = make_docset(tmp_path / "mydocs")
    run_file = tmp_path / "run.trec"
    args = (
        "eval",
        str(dataset),
        "--context",
        "workflow",
        "--no-rerank",
        "--json",
        "--quiet",
        "--run-out",
        str(run_file),
    )
    first = rag(cli_env, *args)
    assert first.returncode == 0, first.stderr
    payload = json.loads(first.stdout)
    assert set(payload["metrics"]) == {"ndcg@10", "recall@10", "mrr@10"}
    assert payload["collection"] == "docs-mydocs" and payload["queries"] == 3
    assert payload["ingest"]["added"] == 3
    assert set(payload["latency_ms"]) >= {"embedding", "retrieval", "parents", "format", "total"}
    assert payload["stats"]["results per query"] > 1
    run = read_trec_run(run_file)
    assert set(run) == {"q1", "q2", "q3"}
    for qid, relevant, _ in QRELS:  # every run id is a section of a file in docs/
        assert all("#" in section and section.split("#")[0] in PAGES for section in run[qid])
        assert relevant in run[qid], (qid, run[qid])
    assert payload["metrics"]["recall@10"] == 1.0

    second = rag(cli_env, *args[:-2])
    assert json.loads(second.stdout)["ingest"]["unchanged"] == 3


def test_docset_qrels_must_name_sections_of_files_in_docs(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    dataset = make_docset(tmp_path / "bad")
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tmissing.md#1\t1\n")
    out = rag(cli_env, "eval", str(dataset), "--quiet")
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert "missing.md#1" in out.stderr and "not under" in out.stderr
