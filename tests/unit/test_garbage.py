"""The garbage filter: fence-aware line classification and which spans are dropped, by reason."""

from __future__ import annotations

import pytest

from rag_service.ingest.garbage import DocumentLines, empty_counts, filter_spans
from rag_service.ingest.spans import trim_span


def headers(text: str) -> list[tuple[int, str]]:
    return [(h.level, h.title) for h in DocumentLines(text).headers]


def reason(text: str) -> str | None:
    span = trim_span(text, 0, len(text))
    assert span is not None
    return DocumentLines(text).garbage_reason(*span)


def test_atx_headers_h1_to_h6_with_closing_hashes_stripped() -> None:
    text = "# One\n## Two ##\n   ### Three\n#### Four #\n##### Five\n###### Six\n####### Seven\n"
    assert headers(text) == [(1, "One"), (2, "Two"), (3, "Three"), (4, "Four"), (5, "Five"), (6, "Six")]


@pytest.mark.parametrize("line", ["#hashtag", "    # indented code", "#", "# ", "## ##", "#\tC#"])
def test_not_headers(line: str) -> None:
    expected = [(1, "C#")] if line == "#\tC#" else []
    assert headers(line) == expected


def test_hash_lines_inside_fences_are_not_headers() -> None:
    text = "# Real\n```bash\n# comment\n```\n~~~\n## also code\n~~~\n## Real two\n"
    assert headers(text) == [(1, "Real"), (2, "Real two")]


def test_fence_closes_only_with_same_char_and_at_least_its_length() -> None:
    text = "````\n```\n# inside\n~~~~\n# still inside\n`````\n# outside\n"
    assert headers(text) == [(1, "outside")]


def test_unclosed_fence_runs_to_the_end() -> None:
    assert headers("# Title\n```python\n# comment\n## more\n") == [(1, "Title")]


def test_front_matter_lines_are_not_headers() -> None:
    assert headers("---\ntitle: T\n# a YAML comment\n---\n# Real\n") == [(1, "Real")]


def test_a_fence_closes_only_with_spaces_or_tabs_after_it() -> None:
    # CommonMark, and the evaluation's section rule: a no-break space after the run leaves the fence open
    assert headers("```\n```\u00a0\n# code\n```\t\n# after\n") == [(1, "after")]


def test_backticks_in_info_string_do_not_open_a_fence() -> None:
    assert headers("``` not `a fence`\n# Header\n") == [(1, "Header")]


@pytest.mark.parametrize("text", ["---", "===", "***", "* * *", "___", "```", "~~~", "#", "- - -\n\n==="])
def test_separator_pieces(text: str) -> None:
    assert reason(text) == "separator"


@pytest.mark.parametrize("text", ["(install-guide)=", '<a id="top"></a>', "(a)=\n\n<a name='b'> </a>\n---"])
def test_anchors_that_render_as_nothing_are_markup(text: str) -> None:
    assert reason(text) == "separator"
    assert reason(f"{text}\n# Install") == "header_only"


@pytest.mark.parametrize(
    "text", ["(a list item in parentheses)=", "(see below)= x", "<a href='u'>docs</a>", "```\n(label)=\n```"]
)
def test_text_that_only_looks_like_an_anchor_is_content(text: str) -> None:
    assert reason(text) is None


@pytest.mark.parametrize("text", ["# Title", "## A\n\n### B\n---", "##### Five\n###### Six"])
def test_header_only_pieces(text: str) -> None:
    assert reason(text) == "header_only"


@pytest.mark.parametrize("text", ["ok", "# Title\nok", "```\n# code comment\n```", "```\n---\n```", "a --- b"])
def test_content_pieces(text: str) -> None:
    assert reason(text) is None


def test_a_span_starting_inside_a_content_line_is_content() -> None:
    text = "see issue # 42 here"
    lines = DocumentLines(text)
    assert lines.garbage_reason(10, len(text)) is None  # "# 42 here" is not a header line


def test_content_chars_counts_stripped_content_lines_only() -> None:
    text = "# Head\n\n  body text  \n---\n```\n# code\n```\n"
    lines = DocumentLines(text)
    assert lines.content_chars(0, len(text)) == len("body text") + len("# code")
    start = text.index("text")
    assert lines.content_chars(start, len(text)) == len("text") + len("# code")


def test_filter_counts_each_reason() -> None:
    text = "---\n\n# Head\n\nA paragraph that is comfortably longer than the minimum size.\n\nTiny one."
    spans = [s for s in (trim_span(text, *p) for p in _paragraph_spans(text)) if s]
    counts = empty_counts()
    kept = filter_spans(DocumentLines(text), spans, min_chunk_chars=20, counts=counts)
    assert [text[s:e] for s, e in kept] == [
        "A paragraph that is comfortably longer than the minimum size.",
        "Tiny one.",  # short, but its text is in no other chunk: kept
    ]
    assert counts == {"separator": 1, "header_only": 1, "too_short": 0}


def test_short_piece_already_inside_kept_chunks_is_dropped() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    long_a, short, long_b = (0, 22), (17, 30), (23, len(text))  # "delta epsilon" is in both long ones
    counts = empty_counts()
    kept = filter_spans(DocumentLines(text), [long_a, short, long_b], min_chunk_chars=15, counts=counts)
    assert kept == [long_a, long_b]
    assert counts["too_short"] == 1


def test_short_piece_only_partly_covered_is_kept() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    counts = empty_counts()
    kept = filter_spans(DocumentLines(text), [(0, 20), (17, 27)], min_chunk_chars=15, counts=counts)
    assert kept == [(0, 20), (17, 27)]
    assert counts["too_short"] == 0


def _paragraph_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    while (cut := text.find("\n\n", start)) != -1:
        spans.append((start, cut))
        start = cut + 2
    return [*spans, (start, len(text))]
