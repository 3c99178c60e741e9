"""`rag eval` checks its whole configuration before it indexes anything: one line, exit 1, nothing stored."""

from __future__ import annotations

import psycopg
import pytest

from rag_service.db.admin import admin_params
from tests.integration.test_cli import cli_env, rag  # noqa: F401  (fixture and helper)
from tests.integration.test_eval_cli import make_dataset
from tests.integration.test_eval_docs import make_docset

pytestmark = pytest.mark.multiprocess

BAD_OPTIONS = {
    "unknown --set key": (("--set", "max_chunk=5"), "unknown override(s) max_chunk; did you mean max_chunks? valid"),
    "unknown --context": (("--context", "nope"), "unknown context 'nope'; valid contexts: chatbot"),
    "--depth too deep": (("--depth", "5000"), "--depth (5000) must be between 1 and 1000"),
    "--depth zero": (("--depth", "0"), "--depth (0) must be between 1 and 1000"),
    "--set text for a number": (("--set", "max_chunks=ten"), "max_chunks ('ten'): --set takes JSON values; write a"),
    "--set a fraction for a count": (("--set", "max_chunks=5.5"), "max_chunks (5.5) must be a whole number"),
    "--set a number for a switch": (("--set", "expand_query=1"), "expand_query (1) must be true or false"),
    "--set out of range": (("--set", "diversity=3"), "diversity (3) must be between 0 and 1"),
    # an option and --set giving one knob: --set silently won
    "--depth and --set": (
        ("--depth", "50", "--set", "candidate_k=10"),
        "candidate_k is given twice, by --depth 50 and by --set candidate_k=10; give it once",
    ),
    "--no-rerank and --set": (
        ("--set", "rerank_enabled=true"),
        "rerank_enabled is given twice, by --no-rerank and by --set rerank_enabled=true; give it once",
    ),
    "--retriever and --set": (
        ("--retriever", "vector", "--set", "keyword_weight=0.5"),
        "keyword_weight is given twice, by --retriever vector and by --set keyword_weight=0.5; give it once",
    ),
}


def stored_documents(url: str) -> int:
    with psycopg.connect(**admin_params(url)) as conn:
        row = conn.execute("SELECT count(*) FROM documents").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("kind", ["beir", "docs"])
def test_bad_options_fail_before_indexing(cli_env, tmp_path, kind):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    dataset = make_dataset(tmp_path / "tiny") if kind == "beir" else make_docset(tmp_path / "docset")
    for name, (options, message) in BAD_OPTIONS.items():
        result = rag(cli_env, "eval", str(dataset), "--no-rerank", "--quiet", *options)
        assert result.returncode == 1, (name, result.stderr)
        assert "Traceback" not in result.stderr, (name, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), (name, result.stderr)
        assert stored_documents(cli_env["RAG_DATABASE_URL"]) == 0, f"{name}: the dataset was indexed first"
    good = rag(cli_env, "eval", str(dataset), "--no-rerank", "--quiet", "--set", "max_chunks=5", "--json")
    assert good.returncode == 0, good.stderr
