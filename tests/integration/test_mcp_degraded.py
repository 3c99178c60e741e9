"""``search_knowledge`` tells the agent about stages that did not run (``metrics.degraded``)."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_mcp import mcp_env, server, session, text_of  # noqa: F401  (fixture and helpers)

pytestmark = pytest.mark.multiprocess


def test_a_stage_that_did_not_run_is_one_line_after_the_context(mcp_env, tmp_path):  # noqa: F811
    missing = tmp_path / "no-such-cross-encoder"
    mcp_env["RAG_RERANK_MODEL"] = str(missing)  # the reranker cannot load: retrieval goes on without it
    text = "Nightly backups are restored with pg_restore into a fresh cluster, then migrated. " * 3
    _, (indexed, found, plain) = asyncio.run(
        session(
            server(mcp_env, tmp_path, "--allow-indexing"),
            [
                ("index_text", {"source": "ops/backups", "text": text, "collection": "kb"}),
                ("search_knowledge", {"query": "how are backups restored?", "collection": "kb"}),
                ("search_knowledge", {"query": "backups", "collection": "kb", "context": "search"}),
            ],
        )
    )
    assert not indexed.is_error and "1 added" in text_of(indexed)
    assert not found.is_error
    context, _, notes = text_of(found).rpartition("\n\n")
    assert context.startswith("[1] ops/backups") and "pg_restore" in context
    assert notes.startswith("degraded: rerank: ") and str(missing) in notes and "\n" not in notes
    assert "degraded: rerank: " in text_of(plain), "every preset that reranks reports it"


def test_a_question_pasted_after_a_traceback_is_searched_by_it_and_says_so(mcp_env, tmp_path):  # noqa: F811
    """The tool goes through retrieve(): the trace is left out (retrieve/focus.py), and the agent is told."""
    trace = "Traceback (most recent call last):\n" + '  File "/srv/app/main.py", line 9, in <module>\n    run()\n' * 20
    text = "Nightly backups are restored with pg_restore into a fresh cluster, then migrated. " * 3
    query = f"{trace}KeyError: 'x'\n\nhow are backups restored?"
    _, (indexed, found) = asyncio.run(
        session(
            server(mcp_env, tmp_path, "--allow-indexing"),
            [
                ("index_text", {"source": "ops/backups", "text": text, "collection": "kb"}),
                ("search_knowledge", {"query": query, "collection": "kb"}),
            ],
        )
    )
    assert not indexed.is_error and not found.is_error
    context, _, notes = text_of(found).rpartition("\n\n")
    assert context.startswith("[1] ops/backups")
    assert "degraded: query: searched its prose (4 words); left out 42 lines of traceback: " in notes
