"""Quotes and paths as users type them, on the real database (audit 56a: D1, D2, D6).

A quoted phrase no chunk holds (within the call's filters) is searched as words, and ``metrics.degraded`` says so;
a phrase some chunk holds still filters exactly as before. An unbalanced quote is literal. A path keeps its
leading ``/``, ``~/``, ``./`` or ``../`` as the documents' ``file`` lexeme does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService
from tests.integration.test_bm25 import checkout_folder

DOCS = {
    "ops.md": """# Operations

## Backups

Nightly backups run with pg_dump at two in the morning. Each backup is kept for thirty days.
The dumps are written under /var/backups/pg/nightly and the credentials are read from ~/.pgpass.

## Replication

A streaming replica follows the primary with a few milliseconds of lag. Run ./promote.sh to fail over.
Its settings live in /opt/app/releases/v2/current/config/env/prod/settings.yaml on each host.
""",
    "search.md": """# Search

## Hybrid search

The vector arm finds chunks by meaning, the keyword arm finds exact terms through the GIN index.
Logs of each search go to var/log/search and restore notes to ../notes/restore.md.
""",
}
KEYWORD_ONLY = {"vector_weight": 0.0, "keyword_weight": 1.0, "min_relevance": 0.0}
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/home/dev/app/main.py", line 12, in main\n'
    '  File "/home/dev/.venv/lib/python3.12/site-packages/urllib3/connectionpool.py", line 715, in urlopen\n'
    "RuntimeError: operation failed\n"
)


@pytest.fixture
def service(db, settings, tmp_path, monkeypatch) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    folder = checkout_folder(tmp_path, monkeypatch, DOCS)
    svc = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    assert svc.index_paths([Path(folder)]).failed == []
    return svc


def _phrase_notes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in result.metrics.degraded if "quoted phrase" in line]


def test_a_phrase_no_chunk_holds_is_searched_as_words_and_said(service):
    result = service.retrieve('"backups at midnight" pg_dump', context="search", **KEYWORD_ONLY)
    assert "kb/ops.md" in {c.source for c in result.chunks}, "the keyword arm was empty"
    (note,) = _phrase_notes(result)
    assert note.startswith("query: ") and '"backups at midnight"' in note and "searched its words" in note


def test_a_phrase_of_known_words_not_in_a_row_is_absent_too(service):
    """Every word of it is in the collection (the look-up passes), so the chunks are asked: none holds the words
    in that order."""
    result = service.retrieve('"thirty backups" kept', context="search", **KEYWORD_ONLY)
    assert "kb/ops.md" in {c.source for c in result.chunks}
    (note,) = _phrase_notes(result)
    assert '"thirty backups"' in note


def test_a_phrase_some_chunk_holds_still_filters_and_says_nothing(service):
    result = service.retrieve('"nightly backups" replica', context="search", **KEYWORD_ONLY)
    assert result.chunks and all("nightly backups" in c.content.lower() for c in result.chunks)
    assert _phrase_notes(result) == []


def test_in_hybrid_the_empty_keyword_arm_is_no_longer_silent(service):
    result = service.retrieve('"backups at midnight" pg_dump', context="search", min_relevance=0.0)
    assert len(_phrase_notes(result)) == 1


def test_a_phrase_only_outside_the_filters_counts_as_absent(service):
    filters = {"source": "kb/search.md"}
    result = service.retrieve('"nightly backups" keyword', context="search", filters=filters, **KEYWORD_ONLY)
    assert {c.source for c in result.chunks} == {"kb/search.md"}
    (note,) = _phrase_notes(result)
    assert "passing the call's filters" in note


def test_a_pasted_traceback_does_not_empty_the_keyword_arm(service):
    """Its ``File "..."`` paths were phrases no chunk holds; the trace is now left out whole (retrieve/focus.py)."""
    result = service.retrieve("why do nightly backups fail?\n" + TRACE, context="search", **KEYWORD_ONLY)
    assert "kb/ops.md" in {c.source for c in result.chunks}
    assert _phrase_notes(result) == []
    assert any(line.startswith("query: searched its prose") for line in result.metrics.degraded)
    quoted = service.retrieve('why do nightly backups fail in "/home/dev/app/main.py"?', "search", **KEYWORD_ONLY)
    (note,) = _phrase_notes(quoted)
    assert "/home/dev/app/main.py" in note and "kb/ops.md" in {c.source for c in quoted.chunks}


def test_an_unbalanced_quote_is_literal(service):
    result = service.retrieve('how do "backups run nightly', context="search", **KEYWORD_ONLY)
    assert "kb/ops.md" in {c.source for c in result.chunks}
    assert _phrase_notes(result) == []


@pytest.mark.parametrize(
    ("query", "source"),
    [
        ("/var/backups/pg/nightly", "kb/ops.md"),
        ("~/.pgpass", "kb/ops.md"),
        ("./promote.sh", "kb/ops.md"),
        ("../notes/restore.md", "kb/search.md"),
        ("where is /opt/app/releases/v2/current/config/env/prod/settings.yaml?", "kb/ops.md"),  # 10 parts: not cut
    ],
)
def test_a_path_finds_the_chunk_that_writes_it(service, query, source):
    """The documents index ``/var/...``, ``/.pgpass``, ``/promote.sh`` (PostgreSQL's ``file`` lexeme after a
    space): the query side stripped the ``/`` (and cut a long path to a prefix), so the keyword arm found nothing."""
    result = service.retrieve(query, context="search", **KEYWORD_ONLY)
    assert [c.source for c in result.chunks] == [source]
