"""Section numbering of a markdown file, the unit that documentation qrels (``file.md#n``) judge.

The rule (``ray-docs-qa/SOURCE.md``, fixed by INTERFACE.md): the text is split at every ATX header
(``#`` to ``######``, up to three spaces of indentation, then a space, a tab or the end of the line)
that lies outside fenced code (an opening run of three or more backticks or tildes, closed by a run
of the same character at least as long; an unclosed fence runs to the end of the file). A file that
starts with a header has section 1 at offset 0; otherwise the text before the first header is
section 0. So the section of an offset is the number of headers that start at or before it. A
reStructuredText file (``.rst``) is split the same way at its section titles (``rag_service.rst_lines``), and an
AsciiDoc file (``.adoc``) at its ``=`` title lines (``rag_service.asciidoc_lines``).

The lines are read by the one markdown scanner (``rag_service.markdown_lines``) with the two
parameters where this rule differs from the chunkers': a header without a title (``#``) splits
too, and front matter is not set apart (a ``# ...`` line inside it splits as anywhere else).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from rag_service.asciidoc_lines import asciidoc_headers
from rag_service.languages import markup_of
from rag_service.markdown_lines import ScanRules, atx_headers
from rag_service.rst_lines import rst_headers

#: where the section rule departs from the chunkers' (module docstring)
SECTION_RULES = ScanRules(empty_headers=True, front_matter=False)


@dataclass(frozen=True, slots=True)
class Section:
    """Section ``number`` of a file: ``text[start:end]``."""

    number: int
    start: int
    end: int


def header_starts(text: str, name: str = "") -> list[int]:
    """Offsets of the lines that are ATX headers outside fenced code, in order (the section rule above); for a
    reStructuredText or AsciiDoc file (``name``'s suffix) the first lines of its section titles."""
    markup = markup_of(name)
    if markup is not None:
        return [header.start for header in (rst_headers if markup == "rst" else asciidoc_headers)(text)]
    return [header.start for header in atx_headers(text, SECTION_RULES)]


def sections(text: str, name: str = "") -> list[Section]:
    """Every section of ``text`` (the file ``name``) with its number and span (see the module docstring)."""
    starts = header_starts(text, name)
    bounds = starts if starts and starts[0] == 0 else [0, *starts]
    first = 1 if starts and starts[0] == 0 else 0
    ends = [*bounds[1:], len(text)]
    return [Section(first + i, start, end) for i, (start, end) in enumerate(zip(bounds, ends, strict=True))]


class SectionIndex:
    """Answers "which section holds this offset" for one file."""

    __slots__ = ("_starts",)

    def __init__(self, text: str, name: str = "") -> None:
        self._starts = header_starts(text, name)

    def section_at(self, offset: int) -> int:
        """The number of the section holding ``offset`` (headers starting at or before it)."""
        return bisect_right(self._starts, max(offset, 0))
