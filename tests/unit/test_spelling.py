"""The pure parts of typo correction: which words may be typos, and the spellings near one."""

from __future__ import annotations

from rag_service.retrieve.spelling import MAX_CHECKED, one_edit, plain_words, respelled, two_edits


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
