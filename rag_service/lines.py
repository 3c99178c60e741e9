"""Line numbers of a span of a stored text: 1-based, inclusive, counted by ``\\n``.

The stored text has ``\\r\\n`` and lone ``\\r`` turned into ``\\n`` (``ingest/loaders.py``), so these are the file's
own line numbers for files whose stored text is the file (code, configuration, markdown, plain text): ingestion
stores them in a chunk's metadata (``with_lines``), retrieval reads them from there (``RetrievedChunk.start_line``)
and derives the lines of a grown or cut span from the text it already holds (``span_end_line``, ``lines_before``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

#: the keys of ``document_chunks.metadata`` that hold a chunk's lines (absent on chunks written before them)
START_LINE, END_LINE = "start_line", "end_line"


def newline_offsets(text: str) -> list[int]:
    """The offsets of every ``\\n`` of ``text``, in order (one pass; ``line_of`` bisects it)."""
    offsets: list[int] = []
    at = text.find("\n")
    while at >= 0:
        offsets.append(at)
        at = text.find("\n", at + 1)
    return offsets


def line_of(newlines: Sequence[int], offset: int) -> int:
    """The 1-based line of the character at ``offset``, given the text's ``newline_offsets``."""
    return bisect_right(newlines, offset - 1) + 1


def span_lines(newlines: Sequence[int], start: int, end: int) -> tuple[int, int]:
    """First and last line of ``text[start:end]``: the last is the line of its last character (a span that ends
    with its line's ``\\n`` ends on that line); an empty span is one line."""
    first = line_of(newlines, start)
    return first, max(first, line_of(newlines, end - 1))


def span_end_line(start_line: int, content: str) -> int:
    """The last line of a span that starts on ``start_line`` and reads ``content``."""
    return start_line + content.count("\n", 0, max(len(content) - 1, 0))


def lines_before(content: str, offset: int) -> int:
    """How many lines ``content[:offset]`` moves down: a section's first line is its child's less this."""
    return content.count("\n", 0, max(offset, 0))
