"""The garbage filter: which pieces of a document are not worth a chunk of their own.

Every line of the document is classified once, aware of fenced code blocks (``` or ~~~):

- *content*: any line with real text, and every line inside a fence (``# comment`` in code is content),
- *header*: an ATX header outside fences, ``#`` to ``######`` then a space or tab and text,
- *markup*: a line made only of ``- = * _ ` ~ #`` and whitespace (``---``, ``===``, ``#``), or a
  fence delimiter such as ```` ```python ````,
- *blank*.

A piece is dropped, and counted under its reason in ``ChunkedDocument.filtered``, when it is

- ``separator``: it touches no content line and no header line,
- ``header_only``: it touches no content line but at least one header line,
- ``too_short``: it is under ``min_chunk_chars`` (stripped) and every non-whitespace character of it
  already lies in a kept piece of at least ``min_chunk_chars`` (an overlap remnant, say).

A short piece with text found in no other chunk is kept, so nothing findable is lost: a document whose
whole text is "See the FAQ." yields one chunk.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate

from rag_service.ingest.spans import Span

SEPARATOR = "separator"
HEADER_ONLY = "header_only"
TOO_SHORT = "too_short"
#: the reasons, in the order ``ChunkedDocument.filtered`` lists them
REASONS = (SEPARATOR, HEADER_ONLY, TOO_SHORT)

_BLANK, _CONTENT, _MARKUP, _HEADER = 0, 1, 2, 3

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})\s*")
_ATX = re.compile(r" {0,3}(#{1,6})[ \t]+(.*)")
_ATX_CLOSING = re.compile(r"(?:^|[ \t])#+\s*$")
_MARKUP_LINE = re.compile(r"[\s\-=*_`~#]+")


@dataclass(frozen=True, slots=True)
class Header:
    """An ATX header line outside fences; ``start``/``end`` delimit the line without its newline."""

    level: int
    title: str
    start: int
    end: int


def classify_lines(text: str) -> Iterator[tuple[int, str, int, Header | None]]:
    """Each line as ``(offset, line, kind, header)``, in order; lazily, so a caller can stop early."""
    fence: tuple[str, int] | None = None  # (fence char, fence length) while inside a fence
    offset = 0
    for line in text.split("\n"):
        kind, header = (_BLANK if not line.strip() else _CONTENT), None
        if fence is not None:
            close = _FENCE_CLOSE.fullmatch(line)
            if close and close[1][0] == fence[0] and len(close[1]) >= fence[1]:
                kind, fence = _MARKUP, None
        elif kind != _BLANK:
            kind, fence, header = _classify(line, offset)
        yield offset, line, kind, header
        offset += len(line) + 1


def _classify(line: str, offset: int) -> tuple[int, tuple[str, int] | None, Header | None]:
    opening = _FENCE_OPEN.fullmatch(line)
    if opening and not (opening[1][0] == "`" and "`" in opening[2]):
        return _MARKUP, (opening[1][0], len(opening[1])), None
    atx = _ATX.fullmatch(line)
    if atx:
        title = _ATX_CLOSING.sub("", atx[2]).strip()
        if title:
            return _HEADER, None, Header(len(atx[1]), title, offset, offset + len(line))
    if _MARKUP_LINE.fullmatch(line):
        return _MARKUP, None, None
    return _CONTENT, None, None


class DocumentLines:
    """The lines of one document, classified once; answers questions about spans of it."""

    __slots__ = ("_content_prefix", "_kinds", "_starts", "headers", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.headers: list[Header] = []
        self._starts: list[int] = []
        kinds = bytearray()
        content_sizes: list[int] = []
        for offset, line, kind, header in classify_lines(text):
            self._starts.append(offset)
            if header is not None:
                self.headers.append(header)
            kinds.append(kind)
            content_sizes.append(len(line.strip()) if kind == _CONTENT else 0)
        self._kinds = bytes(kinds)
        self._content_prefix = [0, *accumulate(content_sizes)]

    def _line_range(self, start: int, end: int) -> range:
        """Indices of the lines that share at least one character with ``[start, end)``."""
        return range(bisect_right(self._starts, start) - 1, bisect_right(self._starts, max(start, end - 1)))

    def garbage_reason(self, start: int, end: int) -> str | None:
        """``separator`` or ``header_only`` if the span touches no content line, else None."""
        has_header = False
        for i in self._line_range(start, end):
            kind = self._kinds[i]
            if kind == _CONTENT:
                return None
            has_header = has_header or kind == _HEADER
        return HEADER_ONLY if has_header else SEPARATOR

    def content_chars(self, start: int, end: int) -> int:
        """Characters of real text in ``[start, end)``: content lines, each stripped."""
        lines = self._line_range(start, end)
        if not lines:
            return 0
        total = self._content_prefix[lines.stop] - self._content_prefix[lines.start]
        for i in {lines.start, lines.stop - 1}:  # lines cut by the span count only their inner part
            line_start = self._starts[i]
            line_end = self._starts[i + 1] - 1 if i + 1 < len(self._starts) else len(self.text)
            if self._kinds[i] == _CONTENT and (start > line_start or end < line_end):
                whole = len(self.text[line_start:line_end].strip())
                total += len(self.text[max(start, line_start) : min(end, line_end)].strip()) - whole
        return total


def empty_counts() -> dict[str, int]:
    """A fresh ``filtered`` mapping with every reason at zero."""
    return dict.fromkeys(REASONS, 0)


def filter_spans(
    lines: DocumentLines,
    spans: Sequence[Span],
    *,
    min_chunk_chars: int,
    counts: dict[str, int],
) -> list[Span]:
    """Return the spans worth a chunk, in order; add the dropped ones to ``counts`` by reason.

    ``spans`` must be trimmed (no leading or trailing whitespace) and sorted by start.
    """
    candidates: list[Span] = []
    for span in spans:
        reason = lines.garbage_reason(*span)
        if reason is None:
            candidates.append(span)
        else:
            counts[reason] += 1
    cover = _union(lines.text, [s for s in candidates if s[1] - s[0] >= min_chunk_chars])
    cover_starts = [s for s, _ in cover]
    kept: list[Span] = []
    for start, end in candidates:
        if end - start < min_chunk_chars:
            i = bisect_right(cover_starts, start) - 1
            if i >= 0 and cover[i][1] >= end:
                counts[TOO_SHORT] += 1
                continue
        kept.append((start, end))
    return kept


def _union(text: str, spans: Sequence[Span]) -> list[Span]:
    """Sorted, disjoint spans covering the non-whitespace characters that ``spans`` cover."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and (start <= merged[-1][1] or text[merged[-1][1] : start].isspace()):
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
