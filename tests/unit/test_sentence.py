"""The sentence strategy: boundaries, abbreviations, whole-sentence chunks and overlap."""

from __future__ import annotations

import random
import re
from itertools import pairwise

from rag_service.ingest.sentence import _END, SentenceChunker, sentence_spans
from rag_service.ingest.summary import extractive_summary
from rag_service.text_breaks import WIDE_SENTENCE_END
from tests.complexity import assert_linear
from tests.unit.test_chunker_properties import assert_chunks_valid


def sentences(text: str) -> list[str]:
    return [text[s:e].strip() for s, e in sentence_spans(text, 0, len(text))]


def test_boundaries_after_terminal_punctuation() -> None:
    text = 'First one. Second one!\nThird one? "Quoted." Last (aside.) End'
    assert sentences(text) == ["First one.", "Second one!", "Third one?", '"Quoted."', "Last (aside.)", "End"]


def test_abbreviations_and_decimals_do_not_end_sentences() -> None:
    text = "Dr. Smith met Mr. Jones, e.g. at noon, i.e. early. Pi is 3.14 today. See Fig. 2 vs. Fig. 3. Done"
    assert sentences(text) == [
        "Dr. Smith met Mr. Jones, e.g. at noon, i.e. early.",
        "Pi is 3.14 today.",
        "See Fig. 2 vs. Fig. 3.",
        "Done",
    ]


def test_blank_line_ends_a_sentence() -> None:
    assert sentences("A heading without a period\n\nThe text.") == ["A heading without a period", "The text."]


def test_chunks_are_whole_sentences_with_sentence_overlap() -> None:
    text = " ".join(f"This is sentence number {i:02d}." for i in range(30))  # 27 chars each
    doc = SentenceChunker(chunk_size=100, chunk_overlap=35, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc)
    for chunk in doc.chunks:
        assert chunk.content.startswith("This is") and chunk.content.endswith(".")
        assert len(chunk.content) <= 100
    for a, b in pairwise(doc.chunks):
        assert a.end_char - b.start_char == 27  # one whole sentence of overlap
    assert doc.chunks[-1].content.endswith("29.")


def test_long_sentence_is_split_recursively() -> None:
    long = "word " * 300 + "end."
    text = f"Short start. {long} Short end."
    doc = SentenceChunker(chunk_size=120, chunk_overlap=20).split(text)
    assert_chunks_valid(text, doc)
    assert all(len(c.content) <= 120 for c in doc.chunks)
    assert doc.chunks[0].content.startswith("Short start.")
    assert doc.chunks[-1].content.endswith("Short end.")


def test_one_megabyte_line_grows_linearly() -> None:
    text = "z" * 1_000_000
    doc = SentenceChunker().split(text)
    assert_linear(lambda n: "z" * n, SentenceChunker().split, n=1_000_000)
    assert doc.chunks[-1].end_char == len(text)


def test_a_run_of_marks_without_white_space_after_it_grows_linearly() -> None:
    """``'.' * n + 'x'``: every mark of the run rescanned the rest of it (40,000 dots took 17 s in the summary)."""
    for mark in ".!?":

        def run_of(n: int, mark: str = mark) -> str:
            return mark * n + "x"

        assert_linear(run_of, lambda text: sentence_spans(text, 0, len(text)), n=10_000)
    assert_linear(lambda n: "# T\n\nSome text.\n\n" + "." * n + "x\n", extractive_summary, n=10_000)


def test_sentence_ends_are_those_of_the_pattern_that_starts_anywhere_in_a_run() -> None:
    """The lookbehind only skips starts that cannot match: random texts end their sentences where they did."""
    anywhere = re.compile(r"[.!?]+[\"'”’)\]]*\s+|\n[^\S\n]*\n\s*|" + WIDE_SENTENCE_END.pattern)
    rng = random.Random(54)
    for _ in range(2_000):
        text = "".join(rng.choice("ab .!?\"')\n。．…中") for _ in range(rng.randint(0, 40)))
        assert [m.span() for m in _END.finditer(text)] == [m.span() for m in anywhere.finditer(text)], text
