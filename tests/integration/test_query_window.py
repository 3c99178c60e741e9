"""What the vector arm read of a long query is said (audit 56a, D3), and the keyword arm's bounds only where it runs.

The bundled model reads 254 word pieces of a query: a question after a paragraph of background was never embedded,
and ``metrics.degraded`` said nothing, while it printed the keyword arm's "kept the 32 longest words" for a
vector-only call, where no word is searched. A question after background is now focused into the window
(retrieve/focus.py); code alone, searched as written, still gets the note.
"""

from __future__ import annotations

import pytest

from rag_service.service import UniversalRAGService

pytestmark = pytest.mark.slow

BACKGROUND = (
    "I joined a small team a few months ago and inherited a setup that somebody else built; the original author left "
    "and there is almost no documentation, so I am learning as I go. "
) * 12
QUESTION = "how are nightly backups restored?"
DOCS = [("ops.md", "Backups", "# Backups\n\nNightly backups are restored with pg_restore into a fresh database.\n")]


@pytest.fixture
def service(db, settings, default_minilm) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    svc = UniversalRAGService(settings, database=db, embedder=default_minilm, reranker=None)
    svc.index_texts(DOCS, collection="window", strategy="markdown")
    return svc


def _window_lines(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in result.metrics.degraded if line.startswith("embed: the query is")]


def test_a_query_past_the_model_window_says_how_much_the_vector_arm_read(service):
    code = "\n".join(f"restore_backup(target=fresh_db_{i}, jobs={i}, path=/backups/night_{i}.dump)" for i in range(30))
    result = service.retrieve(code, "search", collection="window")  # code alone is searched as written
    (line,) = _window_lines(result)
    assert "reads 254" in line and "searched its first" in line and "ask the question alone, or put it first" in line
    assert _window_lines(service.retrieve(QUESTION, "search", collection="window")) == []


def test_a_question_after_background_is_focused_inside_the_window_and_that_is_said(service):
    """One paragraph of ~500 word pieces: its last sentences are searched (retrieve/focus.py), not its first 254."""
    result = service.retrieve(BACKGROUND + "So my question is: " + QUESTION, "search", collection="window")
    assert _window_lines(result) == []
    (line,) = [line for line in result.metrics.degraded if line.startswith("query: searched")]
    assert line.startswith("query: searched its questions and last sentences (")
    assert line.endswith("(the query was past the 254 tokens the embedding model reads)")
    assert result.chunks[0].source == "ops.md"


def test_the_keyword_bounds_note_is_not_printed_for_a_vector_only_call(service):
    # one paragraph of 40+ distinct words, inside the model's window: searched as written, the keyword arm keeps 32
    long_query = BACKGROUND[: len(BACKGROUND) // 12] + "So my question is: " + QUESTION
    vector_only = service.retrieve(long_query, "search", collection="window", vector_weight=1.0, keyword_weight=0.0)
    assert not any("longest" in line for line in vector_only.metrics.degraded)
    hybrid = service.retrieve(long_query, "search", collection="window")
    assert any("longest" in line for line in hybrid.metrics.degraded)
