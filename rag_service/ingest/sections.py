"""The ``html`` and ``semantic-markdown`` strategies: sections at ATX header lines h1–h6.

Both read the section structure from header lines in the stored text. For HTML files the loader
writes each ``<h1>``–``<h6>`` element of the DOM as such a line (``htmltext.html_to_text``), so
``html`` chunks follow the page's DOM sections. LangChain's ``HTMLHeaderTextSplitter`` and
``HTMLSectionSplitter`` are not used: they return re-assembled text with no offsets into anything,
and the stored text must be sliceable to every chunk.

- ``html``: every section (a header line and the text up to the next header of any level) is a
  parent; its children are the recursive split of it; headers are the h1–h6 stack.
- ``semantic-markdown``: consecutive sections are merged while the merged span fits ``chunk_size``
  (a section never straddles two chunks unless it alone is too long, then it is split recursively);
  a merged chunk carries the headers its sections share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rag_service.ingest.children import split_sections
from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.garbage import DocumentLines, empty_counts, filter_spans
from rag_service.ingest.recursive import SizedChunker, recursive_spans
from rag_service.ingest.spans import Span, make_chunk, trim_span
from rag_service.markdown_lines import Header


@dataclass(frozen=True, slots=True)
class Section:
    """``[start, end)`` of one section and the header stack above and including its own header."""

    start: int
    end: int
    path: tuple[Header, ...]

    @property
    def headers(self) -> dict[str, str]:
        """The stack as ``{"h1": ..., "h3": ...}``."""
        return {f"h{h.level}": h.title for h in self.path}


def header_sections(lines: DocumentLines) -> list[Section]:
    """Sections in order: text before the first header line (if any), then one per h1–h6 line."""
    text = lines.text
    sections: list[Section] = []
    heads = lines.headers
    first = heads[0].start if heads else len(text)
    if first > 0:
        sections.append(Section(0, first, ()))
    stack: tuple[Header, ...] = ()
    for i, head in enumerate(heads):
        end = heads[i + 1].start if i + 1 < len(heads) else len(text)
        stack = (*(h for h in stack if h.level < head.level), head)
        sections.append(Section(head.start, end, stack))
    return sections


def _shared(a: tuple[Header, ...], b: tuple[Header, ...]) -> tuple[Header, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


class HtmlChunker(SizedChunker):
    """Chunker for the ``html`` strategy: ``CHILD`` chunks of each h1–h6 section, the section as parent."""

    strategy: ClassVar[str] = "html"

    def split(self, text: str) -> ChunkedDocument:
        """Split ``text`` into sections and their children with exact offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        lines = DocumentLines(text)
        return split_sections(self, lines, ((s.start, s.end, s.headers) for s in header_sections(lines)))


class SemanticMarkdownChunker(SizedChunker):
    """Chunker for ``semantic-markdown``: whole header sections merged while they fit (``TEXT``)."""

    strategy: ClassVar[str] = "semantic-markdown"

    def split(self, text: str) -> ChunkedDocument:
        """Merge consecutive sections up to ``chunk_size``; split alone only a section that is too long."""
        if not text.strip():
            return ChunkedDocument([], {})
        lines = DocumentLines(text)
        groups: list[tuple[Span, tuple[Header, ...]]] = []
        current: Section | None = None
        for section in header_sections(lines):
            if trim_span(text, section.start, section.end) is None:
                continue
            if current is not None and self.length(text[current.start : section.end]) <= self.chunk_size:
                current = Section(current.start, section.end, _shared(current.path, section.path))
                continue
            if current is not None:
                groups.append(((current.start, current.end), current.path))
            current = section
        if current is not None:
            groups.append(((current.start, current.end), current.path))
        counts = empty_counts()
        chunks: list[TextChunk] = []
        for (start, end), path in groups:
            span = trim_span(text, start, end)
            if span is None:
                continue
            if self.length(text[span[0] : span[1]]) <= self.chunk_size:
                pieces = [span]
            else:
                pieces = recursive_spans(
                    text, *span, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, length=self.length
                )
            headers = {f"h{h.level}": h.title for h in path}
            for piece in filter_spans(lines, pieces, min_chunk_chars=self.min_chunk_chars, counts=counts):
                chunks.append(make_chunk(text, piece, index=len(chunks), chunk_type=TEXT, headers=headers))
        return ChunkedDocument(chunks, counts)
