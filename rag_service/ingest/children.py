"""The children of sections, for the strategies with parents (``markdown``, ``html``): each section a parent, or
several when it is longer than ``MAX_PARENT_CHARS``, and its children the recursive split of it (a pipe table's
cut between rows with ``table_rows``: ``ingest/tables.py``), garbage pieces dropped and counted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence

from rag_service.ingest.chunk import CHILD, ChunkedDocument, TextChunk
from rag_service.ingest.garbage import DocumentLines, empty_counts, filter_spans
from rag_service.ingest.recursive import SizedChunker, recursive_spans
from rag_service.ingest.spans import Span, make_chunk, trim_span
from rag_service.ingest.tables import Table, find_tables, table_children

#: a longer section is cut into parents of at most this many characters: every child row stores its parent's
#: text, so one 1 MB section without headers stored 2,631 copies of itself (1,030 MB; its write took ~74 s against
#: ~14 s as plain text); cut at this bound, 66 MB and ~20 s. Two visible sections are longer (anthropic-docs-qa's,
#: up to 100,338 characters): cut here, every visible set's nDCG@10 is unchanged; cut at 16,000, ray-docs-qa lost
#: 0.0015 and anthropic-docs-qa 0.0037 (docs/benchmarks.md "Session 41")
MAX_PARENT_CHARS = 64_000
#: a section's headers: one stack for all of it, or ``(offset, stack)`` pairs in order, each stack shown on the
#: children that start from its offset on (a short section joined to its neighbour: ``ingest/markdown.py``)
SectionHeaders = dict[str, str] | Sequence[tuple[int, dict[str, str]]]
#: what leads the child ``[start, end)`` of a document (``""``: nothing)
Leads = Callable[[int, int], str]


def split_sections(
    chunker: SizedChunker,
    lines: DocumentLines,
    sections: Iterable[tuple[int, int, SectionHeaders]],
    *,
    leads: Leads | None = None,
) -> ChunkedDocument:
    """Each ``(start, end, headers)`` section a parent and its recursive pieces ``CHILD`` chunks.

    Sections and pieces that are garbage are dropped and counted; sizes come from ``chunker``. ``leads(start, end)``
    gives the child ``[start, end)`` the lead a table row's header would (reStructuredText: the name of the directive
    whose body it is cut from; the values of the substitutions or attributes its text refers to).
    """
    text = lines.text
    counts = empty_counts()
    chunks: list[TextChunk] = []
    tables = find_tables(text) if chunker.table_rows else []
    ends = [t.end for t in tables]
    for start, end, headers in sections:
        section = trim_span(text, start, lines.before_trailing_anchors(start, end))
        for parent in [] if section is None else parent_spans(text, section):
            reason = lines.garbage_reason(*parent)
            if reason is not None:
                counts[reason] += 1
                continue
            inside = tables_within(tables, ends, parent)
            _add_children(chunker, lines, parent, headers, inside, chunks, counts, leads)
    return ChunkedDocument(chunks, counts)


def tables_within(tables: Sequence[Table], ends: Sequence[int], parent: Span) -> list[Table]:
    """The parts of ``tables`` (in document order, ``ends`` their ends) that lie in ``parent``."""
    inside: list[Table] = []
    for table in tables[bisect_right(ends, parent[0]) :]:
        if table.header[0] >= parent[1]:
            break
        if (part := table.within(*parent)) is not None:
            inside.append(part)
    return inside


def parent_spans(text: str, section: Span) -> list[Span]:
    """``section`` as the parents of its children: itself, or when longer than ``MAX_PARENT_CHARS`` its
    recursive split into parts of at most that size (every child row stores its parent's text)."""
    if section[1] - section[0] <= MAX_PARENT_CHARS:
        return [section]
    return recursive_spans(text, *section, chunk_size=MAX_PARENT_CHARS, chunk_overlap=0)


def _add_children(
    chunker: SizedChunker,
    lines: DocumentLines,
    parent: Span,
    headers: SectionHeaders,
    tables: list[Table],
    chunks: list[TextChunk],
    counts: dict[str, int],
    leads: Leads | None,
) -> None:
    """Append the kept children of ``parent`` to ``chunks`` (the dropped ones counted in ``counts``)."""
    text = lines.text
    children = dict(_children(chunker, text, parent, tables))
    shared = (parent, text[parent[0] : parent[1]])
    for child in filter_spans(lines, list(children), min_chunk_chars=chunker.min_chunk_chars, counts=counts):
        lead = children[child] or (leads(*child) if leads is not None else "")
        shown = _headers_at(headers, child[0])
        chunks.append(
            make_chunk(text, child, index=len(chunks), chunk_type=CHILD, headers=shown, parent=shared, lead=lead)
        )


def _headers_at(headers: SectionHeaders, offset: int) -> dict[str, str]:
    """The header stack of a child starting at ``offset``: the last part's that starts at or before it."""
    if isinstance(headers, dict):
        return headers
    shown = headers[0][1]
    for start, stack in headers:
        if start > offset:
            break
        shown = stack
    return shown


def _children(chunker: SizedChunker, text: str, parent: Span, tables: list[Table]) -> list[tuple[Span, str]]:
    """The children of a parent in order, each with its lead: its recursive split, a table's by rows."""

    def split(start: int, end: int) -> list[Span]:
        size, overlap = chunker.chunk_size, chunker.chunk_overlap
        return recursive_spans(text, start, end, chunk_size=size, chunk_overlap=overlap, length=chunker.length)

    def fits(start: int, end: int) -> bool:
        return chunker.length(text[start:end]) <= chunker.chunk_size

    out: list[tuple[Span, str]] = []
    cursor = parent[0]
    for table in tables:
        out.extend((span, "") for span in split(cursor, table.start))
        header = text[slice(*table.header)].strip()
        rows = table_children(table, min_chars=chunker.min_chunk_chars, fits=fits, split=split)
        out.extend((span, header if lead else "") for span, lead in rows)
        cursor = table.end
    out.extend((span, "") for span in split(cursor, parent[1]))
    return out
