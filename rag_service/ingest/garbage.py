"""The garbage filter: which pieces of a document are not worth a chunk of their own.

Every line of the document is classified once, from the markdown scanner's line kinds
(``rag_service.markdown_lines``: fences, ATX headers, front matter). Text read as not markdown has no
headers, fences or anchors: that is every strategy that gives no header paths (``recursive``, ``sentence``,
``character``, ``token``, ``semantic``), whose input may be YAML, a config file or plain text (``# a comment``),
and where a markdown header's words would have no header path to live in if its piece were dropped:

- *content*: any line with real text, and every line inside a fence (``# comment`` in code is content),
- *header*: an ATX header with a title outside fences and front matter,
- *markup*: a line made only of ``- = * _ ` ~ #`` and whitespace (``---``, ``===``, ``#``), a
  fence delimiter such as ```` ```python ````, or an anchor that renders as nothing (``ANCHOR_LINE``:
  ``(install-guide)=`` before a header; a chunk that began there was cited at the anchor, not the header),
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Literal

from rag_service.asciidoc_lines import ANCHOR_LINE as ASCIIDOC_ANCHOR
from rag_service.asciidoc_lines import asciidoc_lines
from rag_service.ingest.spans import Span
from rag_service.markdown_lines import ANCHOR_LINE, Header, LineKind, scan_lines
from rag_service.rst_lines import LABEL_LINE, rst_lines

#: how a document's lines are read: as markdown, as text with no structure, as reStructuredText or as AsciiDoc
Syntax = Literal["markdown", "plain", "rst", "asciidoc"]

SEPARATOR = "separator"
HEADER_ONLY = "header_only"
TOO_SHORT = "too_short"
#: the reasons, in the order ``ChunkedDocument.filtered`` lists them
REASONS = (SEPARATOR, HEADER_ONLY, TOO_SHORT)

_BLANK, _CONTENT, _MARKUP, _HEADER, _ANCHOR = 0, 1, 2, 3, 4

#: the scanners' kinds of lines that only mark structure: a fence, an underline
_DELIMITERS = frozenset({LineKind.FENCE, LineKind.SETEXT_UNDERLINE})
_MARKUP_LINE = re.compile(r"[\s\-=*_`~#]+")
_MARKUP_START = frozenset("-=*_`~#")


class DocumentLines:
    """The lines of one document, classified once; answers questions about spans of it.

    ``syntax="plain"`` reads text that is not markdown (YAML, config files, plain text): no line is a header,
    fence or anchor there, so ``# Note 3: ...`` (a comment) is content; markup lines and blank ones stay what
    they are. ``syntax="rst"`` reads reStructuredText (``rst_lines``): titles are headers, their adornment lines
    markup, labels (``.. _install:``) anchors; ``syntax="asciidoc"`` AsciiDoc (``asciidoc_lines``): ``== Title`` lines
    are headers, delimited blocks code, ``[[install]]`` anchors.
    """

    __slots__ = ("_content_prefix", "_kinds", "_starts", "headers", "text")

    def __init__(self, text: str, *, syntax: Syntax = "markdown") -> None:
        self.text = text
        self.headers: list[Header] = []
        self._starts: list[int] = []
        kinds = bytearray()
        content_sizes: list[int] = []
        anchor = _ANCHORS.get(syntax)
        for start, end, line_kind, header in _SCANNERS[syntax](text):
            # the scanner's kinds, as the filter sees them: code is content, a fence line, an adornment or a line
            # that renders no text is markup, unless it is an anchor (a section's last lines leave those out)
            self._starts.append(start)
            size, kind = 0, _MARKUP
            if line_kind is LineKind.HEADER and header is not None:
                self.headers.append(header)
                kind = _HEADER
            elif line_kind not in _DELIMITERS:
                body = text[start:end].strip()
                if not body:
                    kind = _BLANK
                elif anchor is not None and line_kind is not LineKind.CODE and anchor.fullmatch(body):
                    kind = _ANCHOR
                elif line_kind is LineKind.MARKUP:
                    kind = _MARKUP
                elif line_kind is LineKind.CODE or body[0] not in _MARKUP_START or not _MARKUP_LINE.fullmatch(body):
                    size, kind = len(body), _CONTENT
            kinds.append(kind)
            content_sizes.append(size)
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

    def before_trailing_anchors(self, start: int, end: int) -> int:
        """``end`` moved back over the anchors (and blank lines) that end ``[start, end)``: a section's last lines
        that name the next header for links (``(next-section)=``) belong to no chunk of it."""
        lines = self._line_range(start, end)
        for i in reversed(lines):
            if self._kinds[i] not in (_BLANK, _ANCHOR):
                return end if i == lines.stop - 1 else max(start, self._starts[i + 1])
        return end

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


def _plain_lines(text: str) -> Iterator[tuple[int, int, LineKind, None]]:
    """Every line of ``text`` as plain text: ``(start, end, TEXT, None)``, the markdown scanner's shape."""
    start = 0
    for line in text.split("\n"):
        yield start, start + len(line), LineKind.TEXT, None
        start += len(line) + 1


#: how each syntax's lines are read, and which of its lines are anchors
_SCANNERS: dict[str, Callable[[str], Iterable[tuple[int, int, LineKind, Header | None]]]] = {
    "markdown": scan_lines,
    "plain": _plain_lines,
    "rst": rst_lines,
    "asciidoc": asciidoc_lines,
}
_ANCHORS = {"markdown": ANCHOR_LINE, "rst": LABEL_LINE, "asciidoc": ASCIIDOC_ANCHOR}


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


def filter_plain_spans(text: str, spans: Sequence[Span], *, min_chunk_chars: int, counts: dict[str, int]) -> list[Span]:
    """``filter_spans`` over ``text`` read as not markdown, for the strategies that give no header paths."""
    return filter_spans(DocumentLines(text, syntax="plain"), spans, min_chunk_chars=min_chunk_chars, counts=counts)
