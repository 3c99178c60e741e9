"""The recursive strategy: separator order, greedy merging, overlap from whole pieces, exact offsets."""

from __future__ import annotations

from itertools import pairwise

import pytest

from rag_service.embed import HashingEmbedder
from rag_service.ingest.chunk import TEXT
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.recursive import RecursiveChunker, recursive_pieces
from rag_service.tokens import count_tokens
from tests.complexity import assert_linear
from tests.unit.test_chunker_properties import assert_chunks_valid

PARAGRAPH = "This paragraph is about one thing only and it has exactly one idea in it."  # 73 chars


def test_paragraphs_that_fit_stay_whole() -> None:
    text = "\n\n".join(f"{PARAGRAPH} ({i})" for i in range(6))
    doc = RecursiveChunker(chunk_size=200, chunk_overlap=0).split(text)
    assert_chunks_valid(text, doc)
    assert [c.content.count("\n\n") for c in doc.chunks] == [1, 1, 1]
    assert all(c.content.endswith(")") and c.chunk_type == TEXT for c in doc.chunks)


def test_repeated_passages_get_their_own_offsets() -> None:
    text = "\n\n".join([PARAGRAPH] * 5)
    doc = RecursiveChunker(chunk_size=80, chunk_overlap=0).split(text)
    assert_chunks_valid(text, doc)
    assert [c.start_char for c in doc.chunks] == [i * (len(PARAGRAPH) + 2) for i in range(5)]


def test_separators_coarse_to_fine() -> None:
    text = "line one is here\nline two is here. Second sentence! Third? yes\n\nnext paragraph"
    spans = [text[s:e] for s, e, _ in recursive_pieces(text, 0, len(text), chunk_size=20, chunk_overlap=0)]
    assert spans == [
        "line one is here\n",
        "line two is here. ",
        "Second sentence! ",
        "Third? ",
        "yes\n\n",
        "next paragraph",
    ]
    assert "".join(spans) == text


def test_words_then_characters_when_nothing_else_fits() -> None:
    text = "a" * 25 + " tail"
    pieces = recursive_pieces(text, 0, len(text), chunk_size=10, chunk_overlap=0)
    assert "".join(text[s:e] for s, e, _ in pieces) == text
    assert all(n <= 10 for _, _, n in pieces)


def test_chunks_respect_size_and_overlap_in_whole_words() -> None:
    text = " ".join(f"word{i}" for i in range(300))
    doc = RecursiveChunker(chunk_size=60, chunk_overlap=15, min_chunk_chars=0).split(text)
    assert_chunks_valid(text, doc)
    assert all(len(c.content) <= 60 for c in doc.chunks)
    for a, b in pairwise(doc.chunks):
        overlap = a.end_char - b.start_char
        assert 0 < overlap <= 15
        assert text[b.start_char - 1] == " "  # overlap starts at a word boundary
    assert doc.chunks[-1].content.endswith("word299")


def test_no_overlap_means_contiguous_chunks() -> None:
    text = " ".join(f"word{i}" for i in range(100))
    doc = RecursiveChunker(chunk_size=50, chunk_overlap=0, min_chunk_chars=0).split(text)
    for a, b in pairwise(doc.chunks):
        assert text[a.end_char : b.start_char].strip() == ""


def test_token_length_measures_tokens() -> None:
    text = " ".join(["token"] * 400)
    doc = RecursiveChunker(chunk_size=40, chunk_overlap=8, length=count_tokens).split(text)
    assert_chunks_valid(text, doc)
    assert all(c.token_count <= 40 for c in doc.chunks)
    assert max(c.token_count for c in doc.chunks) >= 36


def test_separator_lines_inside_text_are_kept_but_lone_ones_dropped() -> None:
    big = PARAGRAPH * 3
    text = f"{big}\n\n---\n\n{big}"
    doc = RecursiveChunker(chunk_size=len(big) + 2, chunk_overlap=0).split(text)
    assert [c.content for c in doc.chunks] == [big, big]
    assert doc.filtered == {"separator": 1, "header_only": 0, "too_short": 0}


def test_one_megabyte_line_without_separators_grows_linearly() -> None:
    text = "x" * 1_000_000
    doc = RecursiveChunker().split(text)
    assert_linear(lambda n: "x" * n, RecursiveChunker().split, n=1_000_000)
    assert all(len(c.content) <= 500 for c in doc.chunks)
    assert doc.chunks[0].start_char == 0 and doc.chunks[-1].end_char == len(text)
    assert all(b.start_char < a.end_char for a, b in pairwise(doc.chunks))


def test_windows_line_endings_still_split_paragraphs() -> None:
    text = "First paragraph here.\r\n\r\nSecond paragraph here."
    pieces = recursive_pieces(text, 0, len(text), chunk_size=30, chunk_overlap=0)
    assert [text[s:e] for s, e, _ in pieces] == ["First paragraph here.\r\n\r\n", "Second paragraph here."]


def widget_conf() -> str:
    """Audit 47's widget.conf: a title block, 14 comment lines of content, one setting."""
    notes = [
        f"# Note {i}: the pelican cluster needs {100 + i} widget connections per node during the spring migration."
        for i in range(14)
    ]
    return "\n".join(["# Widget daemon configuration", "# ====", "#", *notes, "widget_connections = 113"]) + "\n"


def test_comment_lines_of_plain_text_are_content_not_markdown_headers() -> None:
    text = widget_conf()
    doc = RecursiveChunker().split(text)  # the defaults a .conf file is indexed with
    assert_chunks_valid(text, doc)
    found = "\n".join(c.content for c in doc.chunks)
    assert all(f"# Note {i}:" in found for i in range(14)), "every comment line is in a chunk"
    assert "widget_connections = 113" in found and "# Widget daemon configuration" in found
    assert doc.filtered["header_only"] == 0


def test_plain_text_pieces_of_only_markup_lines_are_still_dropped() -> None:
    first = "First part of the notes, long enough to stand alone as a chunk."
    second = "Second part of the notes, which is as long as the first part is."
    doc = RecursiveChunker(chunk_size=70, chunk_overlap=0).split(f"{first}\n\n----\n####\n\n{second}")
    assert [c.content for c in doc.chunks] == [first, second]
    assert doc.filtered["separator"] == 1


@pytest.mark.parametrize("strategy", ["sentence", "character", "token", "semantic"])
def test_strategies_without_header_paths_keep_comment_lines(strategy: str) -> None:
    """Audit 47's widget.conf under every strategy that gives no header paths: a piece of only ``#`` lines was
    dropped as ``header_only``, and its words were in no chunk (``sentence`` kept none of the 14 notes)."""
    text = widget_conf()
    chunker = make_chunker(strategy, chunk_size=60 if strategy == "token" else 300, embedder=HashingEmbedder())
    doc = chunker.split(text)
    assert_chunks_valid(text, doc)
    found = "\n".join(c.content for c in doc.chunks)
    assert all(f"# Note {i}:" in found for i in range(14)), "every comment line is in a chunk"
    assert doc.filtered["header_only"] == 0
