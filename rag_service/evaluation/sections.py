"""Section numbering of a markdown file, the unit that documentation qrels (``file.md#n``) judge.

The rule (``ray-docs-qa/SOURCE.md``): the text is split at every ATX header (``#`` to ``######``,
up to three spaces of indentation, then a space, a tab or the end of the line) that lies outside
fenced code (an opening run of three or more backticks or tildes, closed by a run of the same
character at least as long; an unclosed fence runs to the end of the file). A file that starts with
a header has section 1 at offset 0; otherwise the text before the first header is section 0. So the
section of an offset is the number of headers that start at or before it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_ATX = re.compile(r" {0,3}#{1,6}(?:[ \t].*)?")


@dataclass(frozen=True, slots=True)
class Section:
    """Section ``number`` of a file: ``text[start:end]``."""

    number: int
    start: int
    end: int


def header_starts(text: str) -> list[int]:
    """Offsets of the lines that are ATX headers outside fenced code, in order."""
    starts: list[int] = []
    fence: tuple[str, int] | None = None
    offset = 0
    for line in text.split("\n"):
        if fence is not None:
            close = _FENCE_CLOSE.fullmatch(line)
            if close and close[1][0] == fence[0] and len(close[1]) >= fence[1]:
                fence = None
        else:
            opening = _FENCE_OPEN.fullmatch(line)
            if opening and not (opening[1][0] == "`" and "`" in opening[2]):
                fence = (opening[1][0], len(opening[1]))
            elif _ATX.fullmatch(line):
                starts.append(offset)
        offset += len(line) + 1
    return starts


def sections(text: str) -> list[Section]:
    """Every section of ``text`` with its number and span (see the module docstring)."""
    starts = header_starts(text)
    bounds = starts if starts and starts[0] == 0 else [0, *starts]
    first = 1 if starts and starts[0] == 0 else 0
    ends = [*bounds[1:], len(text)]
    return [Section(first + i, start, end) for i, (start, end) in enumerate(zip(bounds, ends, strict=True))]


class SectionIndex:
    """Answers "which section holds this offset" for one file."""

    __slots__ = ("_starts",)

    def __init__(self, text: str) -> None:
        self._starts = header_starts(text)

    def section_at(self, offset: int) -> int:
        """The number of the section holding ``offset`` (headers starting at or before it)."""
        return bisect_right(self._starts, max(offset, 0))
