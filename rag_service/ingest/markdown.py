"""The ``markdown`` strategy: sections at ATX headers h1–h4 are parents, their recursive pieces children.

A section is a header line with everything up to the next h1–h4 header outside fenced code (an
unclosed fence runs to the end, so ``#`` lines in it are code); text before the first header is a
section without headers. h5/h6 lines are ordinary content. Each child carries its section's header
stack (``{"h1": "Guide", "h2": "Install"}``; a new h2 clears h3 and h4) and the whole section, trimmed,
as ``parent_content`` with exact ``parent_start``/``parent_end``; a section longer than ``MAX_PARENT_CHARS``
is cut into parents of at most that size (``ingest/children.py``), each with the section's headers.

A section with real text shorter than ``min_chunk_chars`` (its own header line not counted) joins the
next section if that one lies under the same parent header, else the previous one if it does; the
joined section shows the headers its parts share (a tiny h3 joined to its sibling shows h1 and h2); text
before the first header (front matter, a badge) has none of its own and shows the headers of the first section
with text it joins (past a title without text of its own).
Each child of a joined section shows the headers of the part it starts in: a one-line intro joined to the long
section after it took that section's own header from every chunk of it (128 of ray-docs-qa's 12,430 chunks).
If neither neighbour qualifies it stays a short section of its own, never dropped: nothing findable
is lost. Sections without real
text (a header alone, ``---``) are dropped and counted by the garbage filter. Anchor lines that end a section
(``(next-section)=``, naming the header after them) are in neither its parent nor its children.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from rag_service.ingest.children import Leads, split_sections
from rag_service.ingest.chunk import ChunkedDocument
from rag_service.ingest.garbage import DocumentLines, Syntax
from rag_service.ingest.recursive import SizedChunker
from rag_service.markdown_lines import Header

#: deepest header level that starts a section
MAX_SECTION_LEVEL = 4


@dataclass(frozen=True, slots=True)
class _Section:
    start: int
    end: int
    path: tuple[Header, ...]  # the header stack shown on its chunks, own header last
    parent: tuple[Header, ...]  # headers above the section's own header: its neighbours must share them
    content: int  # characters of real text
    #: ``(start, path)`` of the sections joined into this one, in order: a child shows the path of the part it
    #: starts in (joined to a long neighbour, a short intro took that neighbour's own header from all its chunks)
    parts: tuple[tuple[int, tuple[Header, ...]], ...] = ()

    def under(self, parent: tuple[Header, ...]) -> bool:
        return self.path[: len(parent)] == parent

    def join(self, other: _Section) -> _Section:
        return _Section(
            start=min(self.start, other.start),
            end=max(self.end, other.end),
            path=_common(self.path, other.path),
            parent=_common(self.parent, other.parent),
            content=self.content + other.content,
            # adjacent sections, each part list in order: joined in order without sorting (sorting every join took
            # 4 s over 16,000 title-only sections, audit 59)
            parts=(*self.parts, *other.parts) if self.start <= other.start else (*other.parts, *self.parts),
        )

    def headers(self) -> list[tuple[int, dict[str, str]]]:
        """Each part's start and header stack (``children.SectionHeaders``)."""
        return [(start, {f"h{h.level}": h.title for h in path}) for start, path in self.parts]


def _common(a: tuple[Header, ...], b: tuple[Header, ...]) -> tuple[Header, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def markdown_sections(lines: DocumentLines) -> list[_Section]:
    """The document's sections in order: the text before the first header, then one per h1–h4."""
    text = lines.text
    heads = [h for h in lines.headers if h.level <= MAX_SECTION_LEVEL]
    sections: list[_Section] = []
    first = heads[0].start if heads else len(text)
    if first > 0:
        content = lines.content_chars(0, first)
        sections.append(_Section(0, first, (), (), content, ((0, ()),)))
    stack: tuple[Header, ...] = ()
    for i, head in enumerate(heads):
        end = heads[i + 1].start if i + 1 < len(heads) else len(text)
        parent = tuple(h for h in stack if h.level < head.level)
        stack = (*parent, head)
        content = lines.content_chars(head.end, end)
        sections.append(_Section(head.start, end, stack, parent, content, ((head.start, stack),)))
    return sections


def join_small_sections(sections: list[_Section], *, min_chunk_chars: int) -> list[_Section]:
    """Join each section with real text under ``min_chunk_chars`` to a neighbour (see module doc)."""
    out: list[_Section] = []
    pending: _Section | None = None
    # text before the first header (front matter, say), and header-only sections joined after it, have no headers
    # of their own: they take those of the first section with text that joins them
    borrowing = False

    def settle(small: _Section) -> None:
        if out and out[-1].under(small.parent):
            out[-1] = out[-1].join(small)
        else:
            out.append(small)

    for section in sections:
        if pending is not None:
            if section.under(pending.parent):
                joined = pending.join(section)
                if borrowing:
                    parts = tuple((at, section.path if at < section.start else path) for at, path in joined.parts)
                    joined = replace(joined, path=section.path, parts=parts)
                    borrowing = section.content == 0
                pending = joined
                if pending.content >= min_chunk_chars:
                    out.append(pending)
                    pending = None
                continue
            settle(pending)
            pending = None
        if 0 < section.content < min_chunk_chars:
            pending, borrowing = section, not section.path
        else:
            out.append(section)
    if pending is not None:
        settle(pending)
    return out


class MarkdownChunker(SizedChunker):
    """Chunker for the ``markdown`` strategy: ``CHILD`` chunks with headers and their parent section.

    Children are the recursive split of each section (``chunk_size``/``chunk_overlap`` measured by
    ``length``); offsets are relative to the whole document.
    """

    strategy: ClassVar[str] = "markdown"
    #: how the lines are read: the ``rst`` and ``asciidoc`` strategies are this one over their formats' titles
    syntax: ClassVar[Syntax] = "markdown"

    def split(self, text: str) -> ChunkedDocument:
        """Split ``text`` into sections and their children with exact offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        lines = DocumentLines(text, syntax=self.syntax)
        sections = join_small_sections(markdown_sections(lines), min_chunk_chars=self.min_chunk_chars)
        parts = ((s.start, s.end, s.headers()) for s in sections)
        return split_sections(self, lines, parts, leads=self.leads(text))

    def leads(self, text: str) -> Leads | None:
        """What leads a child ``[start, end)`` of ``text`` (``children.split_sections``); markdown: nothing."""
        return None
