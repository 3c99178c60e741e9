"""Headings of a PDF without an outline, from font sizes: short lines set clearly larger than the body text.

Used only where the PDF has no outline (``pdfoutline``), and conservatively: a wrong header path is worse than
none. pypdf reports each piece of text it extracts to a visitor with its font size and the matrices that scale
it (``sized_page_text``); a line's size is the size most of its characters are set in. The body size is the one
most characters of the document are set in; a run of one to ``MAX_HEADING_LINES`` lines set at least
``HEADING_RATIO`` times larger, at most ``MAX_HEADING_CHARS`` long, with a letter in it, not ending in a
sentence's period and without dot leaders, is a heading; the distinct heading sizes, largest first, are the
levels h1, h2, ...
The document gets no headings at all when the signal is not clear (``font_headings``).
"""

from __future__ import annotations

import math
import operator
import re
from collections import Counter
from collections.abc import Callable
from itertools import compress
from typing import Any

from rag_service.ingest.formats.pdfheadings import MAX_HEADING_LEVEL, Heading

#: a heading is set at least this much larger than the body: Word's Heading 2 (13 pt) over Calibri 11 pt is 1.18,
#: LaTeX's \subsection over 10 pt text 1.2; bold alone, or a point more (12 over 11: 1.09), is no clear signal
HEADING_RATIO = 1.15
#: longer lines are prose set large (a pull quote, an abstract), not a heading
MAX_HEADING_CHARS = 120
#: a heading wraps over a line or two, a third at most; a longer run of large lines is display text
MAX_HEADING_LINES = 3
#: the body size must be this share of the characters, else there is no body to be larger than (a brochure)
MIN_BODY_SHARE = 0.5
#: more large lines than this share of the lines is no structure but display text (a poster, a cover): no headings
MAX_HEADING_SHARE = 0.5
#: one size of large lines is no clear signal (a title alone, captions, a logo's words): two levels at least
MIN_HEADING_SIZES = 2
#: sizes closer than this many points are one size (matrices scale sizes to fractions of a point)
SIZE_STEP = 0.5

#: dot leaders: a table of contents' line ("3 Utilities . . . . 5"), set as large as the heading it names
_LEADER = re.compile(r"(?:\.\s?){4,}")

LineSize = float | None  # None: no character on the line, or sizes unknown


def sized_page_text(page: Any, *, on_operator: Callable[..., None] | None = None) -> tuple[str, list[float] | None]:
    """The raw text of ``page`` (a ``pypdf.PageObject``) as ``extract_text`` gives it, and each character's
    font size in points, or None when the visitor's pieces do not add up to that text (then sizes are unknown);
    ``on_operator`` is called before each drawing operator (``visitor_operand_before``)."""
    pieces: list[tuple[str, float]] = []

    def visit(text: str, cm: list[float], tm: list[float], font: object, size: float) -> None:
        if text:
            pieces.append((text, _scaled(size, cm, tm)))

    raw = str(page.extract_text(visitor_text=visit, visitor_operand_before=on_operator) or "")
    if "".join(text for text, _ in pieces) != raw:  # pieces dropped or reordered: sizes would point at wrong text
        return raw, None
    return raw, [size for text, size in pieces for _ in text]


def _scaled(size: float, cm: list[float], tm: list[float]) -> float:
    """``size`` in points on the page: scaled by the vertical axis of the text matrix times the current matrix."""
    try:
        c = float(tm[2]) * float(cm[0]) + float(tm[3]) * float(cm[2])
        d = float(tm[2]) * float(cm[1]) + float(tm[3]) * float(cm[3])
        return abs(float(size)) * math.hypot(c, d)
    except (TypeError, ValueError, IndexError):  # a matrix pypdf could not read: the size alone
        return abs(float(size))


def line_sizes(lines: list[str], sizes: list[float] | None) -> list[LineSize]:
    """For each of a page's ``lines`` (its text split at ``\\n``; ``sizes`` per character of that text), the size
    most of its visible characters are set in (rounded to ``SIZE_STEP``)."""
    if sizes is None:
        return [None] * len(lines)
    out: list[LineSize] = []
    start = 0
    for line in lines:
        # counted in C (compress, map, Counter) then rounded per distinct size: a Python loop per character
        # was the most of this module's time
        visible = Counter(compress(sizes[start : start + len(line)], map(operator.not_, map(str.isspace, line))))
        counts: Counter[float] = Counter()
        for size, count in visible.items():
            counts[_rounded(size)] += count
        out.append(counts.most_common(1)[0][0] if counts else None)
        start += len(line) + 1
    return out


def _rounded(size: float) -> float:
    return round(size / SIZE_STEP) * SIZE_STEP


def font_headings(pages: list[list[str]], sizes: list[list[LineSize]]) -> list[list[Heading]]:
    """Per page of ``pages`` (lists of lines; ``sizes`` their ``line_sizes``), its headings by font size, or
    none on any page when the signal is not clear: sizes unknown on a page, no body size that most text is set
    in, fewer than ``MIN_HEADING_SIZES`` or more than ``MAX_HEADING_LEVEL`` heading sizes, or large lines more
    than ``MAX_HEADING_SHARE`` of the lines."""
    none: list[list[Heading]] = [[] for _ in pages]
    filled = [
        (line, size)
        for page, page_sizes in zip(pages, sizes, strict=True)
        for line, size in zip(page, page_sizes, strict=True)
        if line.strip()
    ]
    body = _body_size(filled)
    if body is None:
        return none
    threshold = body * HEADING_RATIO
    large = sum(1 for _, size in filled if size is not None and size >= threshold)
    if large > MAX_HEADING_SHARE * len(filled):
        return none
    runs = [_heading_runs(page, page_sizes, threshold) for page, page_sizes in zip(pages, sizes, strict=True)]
    levels = sorted({size for page_runs in runs for _, _, size in page_runs}, reverse=True)
    if not MIN_HEADING_SIZES <= len(levels) <= MAX_HEADING_LEVEL:
        return none
    rank = {size: level for level, size in enumerate(levels, 1)}
    return [[Heading(first, last, rank[size]) for first, last, size in page_runs] for page_runs in runs]


def large_lines(pages: list[list[str]], sizes: list[list[LineSize]]) -> list[set[int]]:
    """Per page, the indexes of its lines set at least ``HEADING_RATIO`` times larger than the body (none when the
    body size is not clear): such a line is a heading, not a running header or footer, even when every page
    has one ("Chapter 1" ... "Chapter 4", a chapter a page)."""
    filled = [(line, size) for page, ps in zip(pages, sizes, strict=True) for line, size in zip(page, ps, strict=True)]
    body = _body_size([(line, size) for line, size in filled if line.strip()])
    if body is None:
        return [set() for _ in pages]
    return [
        {i for i, size in enumerate(page_sizes) if size is not None and size >= body * HEADING_RATIO}
        for page_sizes in sizes
    ]


def _body_size(filled: list[tuple[str, LineSize]]) -> float | None:
    """The size most characters of the non-blank ``filled`` lines are set in; None when a size is unknown or no
    size holds ``MIN_BODY_SHARE`` of them."""
    if not filled or any(size is None for _, size in filled):
        return None
    chars: Counter[float] = Counter()
    for line, size in filled:
        chars[size] += len(line) - sum(map(str.isspace, line))  # type: ignore[index]
    body, body_chars = chars.most_common(1)[0]
    return body if body_chars >= MIN_BODY_SHARE * sum(chars.values()) else None


def _heading_runs(lines: list[str], sizes: list[LineSize], threshold: float) -> list[tuple[int, int, float]]:
    """``(first, last, size)`` of each run of consecutive lines in one size of at least ``threshold`` that
    reads as a heading (module doc)."""
    runs: list[tuple[int, int, float]] = []
    i = 0
    while i < len(lines):
        size = sizes[i]
        if size is None or size < threshold or not lines[i].strip():
            i += 1
            continue
        last = i
        while last + 1 < len(lines) and sizes[last + 1] == size and lines[last + 1].strip():
            last += 1
        words = " ".join(" ".join(lines[i : last + 1]).split())
        heading = (
            last - i < MAX_HEADING_LINES
            and len(words) <= MAX_HEADING_CHARS
            and any(char.isalpha() for char in words)
            and not words.endswith(".")
            and not _LEADER.search(words)
        )
        if heading:
            runs.append((i, last, size))
        i = last + 1
    return runs
