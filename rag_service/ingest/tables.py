"""Pipe tables in markdown (GitHub's rule): where each one is, and its children cut between rows.

A table is a text line with a ``|``, the delimiter row under it (``|---|:--:|``, cells of dashes with optional
colons) and the body rows after it: every following text line with a ``|``, up to the first line without one.
Lines inside fenced code are never a table (the scanner's line kinds).

With ``Settings.table_rows`` (off by default) the section strategies cut a table's children here. A configuration
reference answers "which variable sets X" with one row, and a child of several rows holds several answers and
none well: the row's cosine with its question was 0.17 in a child of four rows, 0.38 alone and 0.45 under its
header row (docs/benchmarks.md, "Session 39"). So a table's children are its rows: the first with the header and
delimiter rows, each later one with the table's header row as its ``lead`` (embedded and matched before the
chunk's text, after its header path); rows shorter than ``min_chars`` join the next ones, and a group that does
not fit in a child is cut as any text is. Off by default: the visible sets hold no question a table row answers
(docs/benchmarks.md, "Session 41").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from rag_service.ingest.spans import Span, trim_span
from rag_service.markdown_lines import LineKind, scan_lines

_DELIMITER_ROW = re.compile(r"\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?")


@dataclass(frozen=True, slots=True)
class Table:
    """One pipe table: ``header`` is its first line, ``rows`` its body rows (each line without the whitespace
    around it)."""

    header: Span
    delimiter: Span
    rows: tuple[Span, ...]
    #: the part of a table after a cut (``within``): its header and delimiter rows lie before it
    continued: bool = False

    @property
    def start(self) -> int:
        """Where the table starts: its header line, or its first row when ``continued``."""
        return self.rows[0][0] if self.continued else self.header[0]

    @property
    def end(self) -> int:
        """Where the table ends (its last line, without the line ending)."""
        return self.rows[-1][1] if self.rows else self.delimiter[1]

    def within(self, start: int, end: int) -> Table | None:
        """The part of the table inside ``[start, end)`` (a section cut into parents), or None if no row is."""
        if start <= self.header[0] and self.end <= end:
            return self
        rows = tuple(r for r in self.rows if start <= r[0] and r[1] <= end)
        if start <= self.header[0] < end and self.delimiter[1] <= end:
            return replace(self, rows=rows)
        return replace(self, rows=rows, continued=True) if rows else None


def find_tables(text: str) -> list[Table]:
    """Every pipe table of ``text`` outside fenced code and front matter, in order."""
    # a text line is never blank (the scanner's BLANK kind), so trimming it leaves a span
    lines = [trim_span(text, start, end) if kind is LineKind.TEXT else None for start, end, kind, _ in scan_lines(text)]
    tables: list[Table] = []
    i = 0
    while i + 1 < len(lines):
        head, delimiter = lines[i], lines[i + 1]
        if (
            head is None
            or delimiter is None
            or "|" not in text[head[0] : head[1]]
            or "|" not in (row := text[delimiter[0] : delimiter[1]].strip())
            or not _DELIMITER_ROW.fullmatch(row)
        ):
            i += 1
            continue
        j = i + 2
        while j < len(lines) and (line := lines[j]) is not None and "|" in text[line[0] : line[1]]:
            j += 1
        tables.append(Table(head, delimiter, tuple(r for r in lines[i + 2 : j] if r is not None)))
        i = j
    return tables


#: splits a span of text into trimmed child spans (the recursive split with the chunker's sizes)
SpanSplitter = Callable[[int, int], list[Span]]
#: whether a span of text fits in one child
SpanFits = Callable[[int, int], bool]


def table_children(table: Table, *, min_chars: int, fits: SpanFits, split: SpanSplitter) -> list[tuple[Span, bool]]:
    """The children of ``table``, each with whether it needs the header row as its lead (all but the one holding
    it).

    Rows join until a child holds at least ``min_chars`` characters; one that does not ``fits`` is ``split``.
    """
    groups: list[Span] = []
    start: int | None = None if table.continued else table.header[0]
    for row_start, row_end in table.rows:
        start = row_start if start is None else start
        if row_end - start >= min_chars or (row_start, row_end) == table.rows[-1]:
            groups.append((start, row_end))
            start = None
    if start is not None:  # no rows
        groups.append((start, table.delimiter[1]))
    children: list[tuple[Span, bool]] = []
    for group in groups:
        spans = [group] if fits(*group) else split(*group)
        header_here = not children and not table.continued
        children.extend((span, not (header_here and k == 0)) for k, span in enumerate(spans))
    return children
