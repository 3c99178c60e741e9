"""A PDF page's lines written as markdown: its headings as ATX header lines, the rest escaped.

The headings come from the outline (``pdfoutline``) or, in a PDF without one, from font sizes (``pdffonts``);
either names them as ``Heading`` records over a page's lines. Writing them as ``## Title`` lines is how Word and
HTML files carry their headings too (``docxtext``, ``htmltext``): the ``markdown`` strategy reads the header path
from the stored text, so a re-chunk of the stored text alone (``rag reindex --all``) finds it again.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from rag_service.ingest.formats.markdown_escape import escape_plain_line

#: ATX header lines go to ``######``: a deeper outline level or font size has no header line to be written as
MAX_HEADING_LEVEL = 6


@dataclass(frozen=True, slots=True)
class Heading:
    """A heading on a page: its lines ``first`` to ``last`` (inclusive, indexes into the page's lines) and its
    ``level`` (1 to ``MAX_HEADING_LEVEL``)."""

    first: int
    last: int
    level: int


def squashed(text: str) -> str:
    """``text`` compared loosely: NFKC (the ``ﬁ`` ligature is ``fi``), case folded, its letters and digits alone.
    pypdf may drop or add the spaces between words, and a bookmark may lose a hyphen or quote its heading has
    ("Nonregular files" for "Non-regular files"), so a title and its line are compared without them."""
    return "".join(char for char in unicodedata.normalize("NFKC", text).casefold() if char.isalnum())


def marked_page(lines: list[str], headings: list[Heading]) -> str:
    """The page's text: each heading's lines as one ATX header line of its level (its own words, whitespace made
    single spaces), every other line that would read as markdown structure escaped (``\\# of ferrets``)."""
    starts = {heading.first: heading for heading in headings}
    out: list[str] = []
    i = 0
    while i < len(lines):
        heading = starts.get(i)
        if heading is None:
            line = lines[i]
            body = line.lstrip()
            out.append(line[: len(line) - len(body)] + escape_plain_line(body))
            i += 1
            continue
        title = " ".join(" ".join(lines[heading.first : heading.last + 1]).split())
        out.append(f"{'#' * heading.level} {title}")
        i = heading.last + 1
    return "\n".join(out).strip()
