"""A misspelt query word is searched as the collection spells it, on the real database (audit 56a: D5, F3).

The misspelt word is a lexeme no chunk holds: the keyword arm found nothing. Respelled from the collection's own
vocabulary (``lexeme_stats``), it finds the chunk the right spelling finds, and ``metrics.degraded`` says so. A word
the collection holds, or holds an inflection of, and words that are not plain (identifiers, mixed case, numbers,
other scripts, short words) are searched as typed. Off (the default, ``RAG_TYPO_CORRECTION``), nothing is.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag_service.embed import HashingEmbedder, bundled_model_path
from rag_service.errors import ModelLoadError
from rag_service.model_window import ModelWindow, tokenizer_window
from rag_service.service import UniversalRAGService

DOCS = [
    (
        "client.md",
        "Client",
        "# Client\n\n## Connect\n\nCall connect with the head node address to start a session; the client keeps "
        "it open until the work is done.\n\n"
        "## Disconnect\n\nCall disconnect when the work is done: the session ends and the node's workers stop, "
        "and their logs are kept.\n\n"
        "## Reconnect\n\nAfter a network error the client waits, then tries to disconnect and connect the session "
        "to the node again.\n\n"
        "## Shutdown\n\nShutdown has to disconnect every client first, then it stops the node and its session.\n",
    ),
    (
        "deploy.md",
        "Deploy",
        "# Deploy\n\n## Deploy an application\n\nTo deploy, write a config file and run the deploy command; a deployed "
        "application is listed by the status command.\n\n"
        "## Update an application\n\nAn application is updated in place, one replica after the other, while it "
        "serves.\n\n"
        "## Delete an application\n\nA deleted application frees its node, its replicas and the memory they held.\n\n"
        "## Quiesce\n\nTo quiesce a replica, drain its queue and wait until its last request is answered.\n",
    ),
    (
        "storage.md",
        "Storage",
        "# Storage\n\n## Buckets\n\nObjects are written to buckets; every bucket has an owner, a region and a "
        "retention period.\n",
    ),
]
KEYWORD_ONLY = {"vector_weight": 0.0, "keyword_weight": 1.0, "min_relevance": 0.0}


def _service(db, settings, *, typo_correction: bool) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    on = replace(settings, typo_correction=typo_correction)
    svc = UniversalRAGService(on, database=db, embedder=HashingEmbedder(), reranker=None)
    assert svc.index_texts(DOCS, collection="spelling", strategy="markdown").failed == []
    return svc


@pytest.fixture
def service(db, settings) -> UniversalRAGService:  # type: ignore[no-untyped-def]
    return _service(db, settings, typo_correction=True)


def _search(service: UniversalRAGService, query: str, **overrides: object):  # type: ignore[no-untyped-def]
    options = {**KEYWORD_ONLY, **overrides}
    return service.retrieve(query, context="search", collection="spelling", **options)  # type: ignore[arg-type]


def _spelling_notes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in result.metrics.degraded if "not a word of the collection" in line or "not words" in line]


def _headers(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.header_path for c in result.chunks]


def test_a_misspelt_word_finds_what_its_spelling_finds_and_says_so(service):
    right, typo = _search(service, "how do I disconnect"), _search(service, "how do I disconnnect")
    assert _headers(typo) == _headers(right) and _headers(right), "the keyword arm found nothing for the typo"
    assert _spelling_notes(typo) == ['query: searched "disconnect" for "disconnnect" (not a word of the collection)']
    assert _spelling_notes(right) == []


def test_both_arms_search_the_spelling_and_a_capitalised_word_keeps_its_capital(service):
    result = _search(service, "Disconect the client", vector_weight=0.6, keyword_weight=0.4)
    assert _spelling_notes(result) == ['query: searched "Disconnect" for "Disconect" (not a word of the collection)']
    assert "Client > Disconnect" in _headers(result)[:2]


def test_several_misspelt_words_are_named_in_one_line(service):
    (note,) = _spelling_notes(_search(service, "disconnnect the sesion"))
    pairs = '"disconnect" for "disconnnect", "session" for "sesion"'
    assert note == f"query: searched {pairs} (not words of the collection)"


def test_a_rare_word_the_collection_holds_is_never_respelled(service):
    """``quiesce`` is written once, ``buckets`` is one edit from ``bucket``: both are words of the collection."""
    for query in ("quiesce", "buckets", "quiesce the buckets"):
        assert _spelling_notes(_search(service, query)) == [], query
    (note,) = _spelling_notes(_search(service, "quiesce the buckets, then disconnnect"))
    assert note == 'query: searched "disconnect" for "disconnnect" (not a word of the collection)'


def test_an_inflection_the_collection_holds_is_not_respelled(service):
    """``deploying`` is no word of the collection, but its stem ``deploy`` is: the keyword arm finds it as it is."""
    result = _search(service, "deploying an application")
    assert _spelling_notes(result) == []
    assert "Deploy > Deploy an application" in _headers(result)
    (note,) = _spelling_notes(_search(service, "deploying an aplication"))
    assert note == 'query: searched "application" for "aplication" (not a word of the collection)'


@pytest.mark.parametrize(
    "query",
    [
        "disconnnect_client",  # an identifier
        "client.disconnnect()",  # a dotted name, a call
        "DisConnnect",  # mixed case
        "DISCONNNECT",  # an acronym's case
        "disconnnect2",  # letters and digits
        "123456",  # a number
        "trennen",  # a word of another language the collection has nothing near
        "désconnecter",  # a word of another script's letters
        "ndoe",  # four letters (``node`` is a word of the collection)
        "--disconnnect",  # a flag
        "-disconnnect",  # an exclusion
    ],
)
def test_words_that_are_not_plain_are_left_alone(service, query):
    assert _spelling_notes(_search(service, query)) == [], query
    assert _spelling_notes(_search(service, f"{query} disconnnect")), "a plain typo beside it is still respelled"


def test_a_query_of_many_unknown_words_is_left_as_it_is(service):
    """More than ``MAX_UNKNOWN`` words the collection lacks: another language, not typos."""
    result = _search(service, "wie kann ich disconnnect meine verbindung richtig beenden")
    assert _spelling_notes(result) == []
    assert len(_unknown_notes(result)) == 1, "it is said once, as another language or subject"
    assert _spelling_notes(_search(service, "wie kann ich disconnnect meine verbindung")), "three are respelled"


def test_off_by_default_nothing_is_respelled(db, settings):
    assert settings.typo_correction is False
    result = _search(_service(db, settings, typo_correction=False), "how do I disconnnect")
    assert _spelling_notes(result) == [] and result.chunks == []


CURL = (
    "fetch.md",
    "Fetch",
    "# Fetch\n\n## Download\n\nRun curl with the address of the file to download it into the folder you are in, "
    "under the name the server gives it.\n\n"
    "## Upload\n\nRun curl with the upload flag and the path of a file to send that file to the server, which "
    "answers with its new address.\n\n"
    "## Headers\n\nGive curl a header with the header flag, once per header, when the server asks for a token or "
    "a content type.\n",
)


class _ReadingEmbedder(HashingEmbedder):
    """The hashing embedder with the bundled model's tokenizer as its window (``model_window``): the model's own
    vocabulary (BERT uncased WordPiece), read from its files."""

    def window(self) -> ModelWindow:
        return tokenizer_window(bundled_model_path())


@pytest.mark.parametrize("vector_weight", [0.0, 0.6])
def test_a_word_of_the_models_vocabulary_is_searched_as_typed(db, settings, vector_weight):
    """``curly`` is no word of the collection and one edit from ``curl``, which it holds: it is a word of the
    embedding model's vocabulary (one token), so a real word, searched as typed by both arms; a typo beside it is
    still respelled (``servr``: read in pieces). Without a model's vocabulary (the hashing embedder) ``curly`` is
    respelled, as before."""
    weights = {"vector_weight": vector_weight, "keyword_weight": 1.0 - vector_weight}
    reading = UniversalRAGService(
        replace(settings, typo_correction=True), database=db, embedder=_ReadingEmbedder(), reranker=None
    )
    assert reading.index_texts([*DOCS, CURL], collection="spelling", strategy="markdown").failed == []
    assert _spelling_notes(_search(reading, "an opening curly brace", **weights)) == []
    (note,) = _spelling_notes(_search(reading, "an opening curly brace from the servr", **weights))
    assert note == 'query: searched "server" for "servr" (not a word of the collection)'
    hashing = _service(db, settings, typo_correction=True)
    (note,) = _spelling_notes(_search(hashing, "an opening curly brace from the servr", **weights))
    assert note == 'query: searched "curl" for "curly", "server" for "servr" (not words of the collection)'


class _UnloadableEmbedder(HashingEmbedder):
    """An embedder whose model cannot be loaded when its window is asked once ``missing`` (a model uninstalled after
    the collection was indexed)."""

    missing = False

    def window(self) -> ModelWindow | None:
        if self.missing:
            raise ModelLoadError("model 'test/missing' is not installed: pip install it")
        return None


def test_a_keyword_search_with_no_loadable_model_still_respells_and_says_so(db, settings):
    """A keyword-only search needs no model: when the model's vocabulary cannot be read, the typo is respelled as
    without the guard and one line says why no word was exempt, instead of the search failing."""
    embedder = _UnloadableEmbedder()
    svc = UniversalRAGService(replace(settings, typo_correction=True), database=db, embedder=embedder, reranker=None)
    assert svc.index_texts(DOCS, collection="spelling", strategy="markdown").failed == []
    embedder.missing = True
    result = _search(svc, "how do I disconnnect", **KEYWORD_ONLY)
    assert _spelling_notes(result) == ['query: searched "disconnect" for "disconnnect" (not a word of the collection)']
    (note,) = [line for line in result.metrics.degraded if "vocabulary" in line]
    assert note.startswith("query: typo correction read no vocabulary of test/hashing-embedder")
    assert result.chunks


def _unknown_notes(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [line for line in result.metrics.degraded if "appear nowhere in the collection" in line]


@pytest.mark.parametrize("typo_correction", [False, True])
def test_a_question_in_another_language_is_named_as_such(db, settings, typo_correction):
    """Most of a German question's words are no words of the English collection: one line says so and names them,
    whether typo correction is on or off; the question in English, and one with a few unknown words, get none."""
    svc = _service(db, settings, typo_correction=typo_correction)
    result = _search(svc, "Wie kann ich die Sitzung mit dem Knoten wieder verbinden?", min_relevance=0.0)
    assert _unknown_notes(result) == [
        'query: 10 of its 10 words appear nowhere in the collection ("wie", "kann", "ich", "die", "sitzung", ...): '
        "if it is in another language than the documents, ask in theirs; else they may not cover it"
    ]
    assert _unknown_notes(_search(svc, "How do I connect the session to the node again?")) == []
    assert _unknown_notes(_search(svc, "How do I connect the session to the cluster gateway again?")) == []
