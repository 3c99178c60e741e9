"""A PDF's outline (its bookmarks) as headings: each title found on the page it points to.

The outline is the safest heading signal a PDF has: Word, LaTeX with hyperref and most exporters write one
from the document's own headings, and its nesting is their level. Each entry's title is looked for among the
lines of its destination page, after the previous entry found on that page (the outline is in reading order);
it matches a run of up to ``MAX_TITLE_LINES`` whole lines, compared loosely (``pdfheadings.squashed``), with or
without a section number before it ("1.2 Installation" for the entry "Installation"). A title not found so is
skipped, never guessed: a wrong header path is worse than none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rag_service.ingest.formats.pdfheadings import MAX_HEADING_LEVEL, Heading, squashed

#: a title wrapped over more lines than this is not looked for further (a heading is a line or two)
MAX_TITLE_LINES = 3
#: a section number before a heading's words: "1.2", "IV.", "A.", "A.1", "Chapter 3", "Appendix B"; or the word
#: alone ("Appendix A Copying" for the entry "A Copying")
_NUMBERS = (
    re.compile(
        r"^(?:(?:chapter|section|part|appendix)\s+\S+|\d+(?:\.\d+)*\.?|[ivxlcdm]+\.|[a-z](?:\.\d+)+\.?|[a-z]\.)[\s:.)-]*",
        re.IGNORECASE,
    ),
    re.compile(r"^(?:chapter|section|part|appendix)\s+", re.IGNORECASE),
)
#: what a damaged outline makes pypdf raise while it is read; the page text is still good, so the file is
#: indexed without headings instead of failing
_OUTLINE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError)


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    """One bookmark: its ``title``, its ``level`` (1 at the top of the outline) and its 0-based ``page``."""

    title: str
    level: int
    page: int


def read_outline(reader: Any) -> list[OutlineEntry] | None:
    """The entries of the outline of ``reader`` (a ``pypdf.PdfReader``) that point to one of its pages, in
    order; None when the PDF has no outline, ``[]`` when it has one that gives nothing (damaged, or only links
    to places outside the document): then it has no headings, and no guess from fonts either."""
    from pypdf.errors import PdfReadError

    try:
        items = reader.outline
    except (PdfReadError, *_OUTLINE_ERRORS):  # damaged: it exists, so fonts are no substitute for it
        return []
    if not items:
        return None
    entries: list[OutlineEntry] = []
    pages = len(reader.pages)
    for depth, item in _walk(items, 1):
        try:
            page = reader.get_destination_page_number(item)
            title = str(item.title or "")
        except (PdfReadError, *_OUTLINE_ERRORS):  # one damaged entry: skipped alone
            continue
        if page is not None and 0 <= page < pages and depth <= MAX_HEADING_LEVEL and title.strip():
            entries.append(OutlineEntry(title, depth, page))
    return entries


def _walk(items: list[Any], depth: int) -> list[tuple[int, Any]]:
    """The outline's entries in order with their depth; pypdf gives an entry's children as the list after it."""
    out: list[tuple[int, Any]] = []
    for item in items:
        if isinstance(item, list):
            out.extend(_walk(item, depth + 1))
        else:
            out.append((depth, item))
    return out


def outline_headings(entries: list[OutlineEntry], pages: list[list[str]]) -> list[list[Heading]]:
    """Per page of ``pages`` (each a list of lines), the headings of ``entries`` found on it (module doc)."""
    found: list[list[Heading]] = [[] for _ in pages]
    for entry in entries:
        key = squashed(entry.title)
        if not key:  # no letter or digit to find
            continue
        lines = pages[entry.page]
        start = found[entry.page][-1].last + 1 if found[entry.page] else 0
        span = _find_title(key, lines, start)
        if span is not None:
            found[entry.page].append(Heading(span[0], span[1], entry.level))
    return found


def _find_title(key: str, lines: list[str], start: int) -> tuple[int, int] | None:
    """The first run of whole lines from ``start`` on that reads ``key`` (squashed), a section number aside."""
    for first in range(start, len(lines)):
        if not lines[first].strip():
            continue
        # a line of a number alone is no heading's number: a page number above the heading ("1", then "1 Intro")
        numbered = bool(_NUMBERS[0].sub("", lines[first].strip(), count=1).strip())
        for last in range(first, min(first + MAX_TITLE_LINES, len(lines))):
            words = " ".join(" ".join(lines[first : last + 1]).split())
            whole = squashed(words)
            if whole == key or (numbered and any(squashed(n.sub("", words, count=1)) == key for n in _NUMBERS)):
                return first, last
            if len(whole) >= len(key) + 16:  # already longer than the title and any number before it
                break
    return None
