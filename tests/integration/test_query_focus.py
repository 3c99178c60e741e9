"""A question pasted after a traceback, a log or background finds what the question alone finds (audit 56a, F1).

Through ``retrieve()`` with the bundled model: the embedding model read the trace (its first 254 word pieces), the
keyword arm its 32 longest words, so a page about connection errors outranked the page the question asks about.
"""

from __future__ import annotations

import pytest

from rag_service.service import UniversalRAGService

pytestmark = pytest.mark.slow

DOCS = [
    (
        "ops.md",
        "Backups",
        "# Backups\n\nA nightly backup is restored with pg_restore into a fresh database: create the database, run "
        "pg_restore with --jobs for speed, then run the migrations.\n",
    ),
    (
        "errors.md",
        "Connection errors",
        "# Connection errors\n\nConnectionRefusedError with Errno 111 (connection refused) means nothing listens on "
        "the socket: the server is down or the port is wrong. Check the traceback's last frame in socket.py and the "
        "site-packages client library, and raise the connection timeout.\n",
    ),
    (
        "logs.md",
        "Worker logs",
        "# Worker logs\n\nEach worker logs INFO, WARNING and ERROR lines with a timestamp, its pid and the upstream "
        "response time in ms; a failed task is retried with its attempt number.\n",
    ),
]
QUESTION = "How do I restore a nightly backup into a fresh database?"
TRACEBACK = """Traceback (most recent call last):
  File "/home/dev/app/main.py", line 42, in <module>
    result = restore(config)
  File "/home/dev/.venv/lib/python3.11/site-packages/pgclient/connection.py", line 118, in connect
    conn = self._socket.connect(timeout=timeout)
  File "/usr/lib/python3.11/socket.py", line 836, in create_connection
    raise err
ConnectionRefusedError: [Errno 111] Connection refused"""
LOG = "\n".join(
    f"2024-05-02 10:14:0{i},112 {level} worker.py:88 -- worker pid=4242 upstream response took {i}210 ms, attempt {i}/5"
    for i, level in enumerate(["INFO", "WARNING", "ERROR", "ERROR", "WARNING", "INFO"])
)
BACKGROUND = (
    "Some background first: I joined a small team a few months ago and inherited a setup that somebody else built; "
    "the original author left and there is almost no documentation, so I am learning as I go. "
) * 8


@pytest.fixture
def service(db, settings, default_minilm) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    svc = UniversalRAGService(settings, database=db, embedder=default_minilm, reranker=None)
    svc.index_texts(DOCS, collection="focus", strategy="markdown")
    return svc


def _first(service: UniversalRAGService, query: str, **overrides: object) -> tuple[str, list[str]]:
    result = service.retrieve(query, "search", collection="focus", min_relevance=0.0, **overrides)
    return result.chunks[0].source, result.metrics.degraded


@pytest.mark.parametrize("arm", [{}, {"vector_weight": 1.0, "keyword_weight": 0.0}, {"vector_weight": 0.0}])
def test_a_question_after_a_traceback_and_a_log_finds_what_the_question_alone_finds(service, arm):
    alone, quiet = _first(service, QUESTION, **arm)
    assert alone == "ops.md" and not any(line.startswith("query:") for line in quiet)
    pasted, degraded = _first(service, f"{TRACEBACK}\n{LOG}\n\n{QUESTION}", **arm)
    assert pasted == alone
    (line,) = [line for line in degraded if line.startswith("query:")]
    assert line == (
        "query: searched its prose (11 words); left out 8 lines of traceback and 6 log lines: to search any of it, "
        "put it in the question"
    )


def test_a_question_after_a_trace_it_labels_and_after_background(service):
    after, _ = _first(service, f"{QUESTION}\n\nI get this error:\n\n{TRACEBACK}")
    assert after == "ops.md"
    source, degraded = _first(service, f"{BACKGROUND}\n\nSo my question is: {QUESTION}")
    assert source == "ops.md"
    assert any(line.startswith("query: searched its questions and last paragraph (15 words)") for line in degraded)
    assert not any(line.startswith("embed: the query is") for line in degraded), "focused inside the window"


def test_a_traceback_alone_is_searched_by_its_error_line(service):
    source, degraded = _first(service, TRACEBACK)
    assert source == "errors.md"
    assert any(line.startswith("query: searched its error lines (5 words)") for line in degraded)


def test_a_question_after_a_paste_past_the_query_bound_is_still_found(service):
    """A query over ``MAX_QUERY_CHARS`` keeps its first and last halves: the question at the end of a long paste was
    cut off with the rest of the tail, and the call searched the trace alone without a word."""
    paste = "\n".join([TRACEBACK, LOG] * 20)  # ~20,000 characters of trace and log
    source, degraded = _first(service, f"{paste}\n\n{QUESTION}")
    assert source == "ops.md"
    assert any(line.startswith("query: the query is ") and "its first and last 4,000" in line for line in degraded)
