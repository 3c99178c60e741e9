"""The pure parts of typo correction: which words may be typos, which are words of the embedding model's own
vocabulary, and the spellings near one."""

from __future__ import annotations

from collections.abc import Sequence

from rag_service.embed import BUNDLED_MINILM, embedder_for
from rag_service.model_window import model_window
from rag_service.retrieve.spelling import (
    MAX_CHECKED,
    model_words,
    one_edit,
    plain_words,
    respelled,
    two_edits,
)


def test_plain_words_are_letters_only_lower_case_or_capitalised_and_long_enough():
    text = (
        "Howto disconnnect ray.disconnect() with num_cpus, numCpus, GPU, HTTPS, --force, -exclude, 12345, "
        "abc1def, café, /tmp/logs, user@example, node and v2.3 in #channel and $HOME: Disconnnect again"
    )
    assert plain_words(text) == {"howto": "Howto", "disconnnect": "disconnnect", "again": "again"}


def test_plain_words_are_bounded():
    words = plain_words(" ".join(f"word{chr(97 + i % 26)}{chr(97 + i // 26)}x" for i in range(100)))
    assert len(words) == MAX_CHECKED


def test_one_edit_deletes_swaps_replaces_and_inserts():
    edits = one_edit("form")
    assert {"orm", "fom", "ofrm", "fomr", "farm", "forms", "fiorm"} <= edits
    assert "form" not in edits and "fmro" not in edits
    assert len(edits) == len(set(edits))


def test_two_edits_keep_the_first_letter():
    edits = two_edits("uncultured")
    assert "cultured" not in edits  # two deletions at the start: another word, no typo
    assert "unculture" in two_edits("unculturedd")  # two deletions inside
    assert "uncultured" in two_edits("uncultrued")  # a letter moved: a deletion and an insertion
    assert all(e.startswith("u") for e in edits)


def test_respelled_replaces_plain_occurrences_only_keeping_capitals():
    query = "Disconnnect, then disconnnect client.disconnnect and DISCONNNECT"
    fixed = respelled(query, {"Disconnnect": "Disconnect"})
    assert fixed == "Disconnect, then disconnect client.disconnnect and DISCONNNECT"


def test_model_words_are_the_words_the_embedding_model_reads_whole():
    """All-MiniLM-L6-v2's own vocabulary (BERT uncased WordPiece, read from its files, no model loaded): a real word
    is one token, a typo is read in pieces."""
    window = model_window(embedder_for(BUNDLED_MINILM))
    assert window is not None
    words = ["curly", "adept", "merlin", "decorater", "florescent", "disconnnect", "curlly"]
    assert model_words(words, window.count) == {"curly", "adept", "merlin"}


def test_model_words_need_a_model_and_words():
    def count(texts: Sequence[str]) -> list[int]:
        return [1 if text in {"curly", "brace"} else 3 for text in texts]

    assert model_words(["curly", "curlly", "brace"], count) == {"curly", "brace"}
    assert model_words(["curly", "brace"], None) == set(), "no model (the hashing embedder): no word is known"
    assert model_words([], count) == set()
