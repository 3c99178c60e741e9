"""The values every chunker returns, and the interface chunkers share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

#: chunk_type values stored in ``document_chunks.chunk_type``
CHILD = "child"  # a small piece of a markdown section; the section is its parent
TEXT = "text"  # a piece from a flat strategy (recursive, sentence, token, code, json...); no parent
#: the keys of ``TextChunk.headers``, outermost first
HEADER_KEYS = ("h1", "h2", "h3", "h4", "h5", "h6")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk of a document.

    ``document_text[start_char:end_char] == content`` always holds. For markdown children,
    ``parent_content == document_text[parent_start:parent_end]`` is the whole section (header kept).
    """

    content: str
    start_char: int
    end_char: int
    chunk_index: int
    chunk_type: str
    token_count: int
    headers: dict[str, str] = field(default_factory=dict)
    parent_content: str | None = None
    parent_start: int | None = None
    parent_end: int | None = None
    #: stored in ``document_chunks.metadata`` (``page_start``/``page_end`` for PDFs)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: text that gives the chunk its meaning, embedded and matched after its header path but not part of it:
    #: the header row of the table a row comes from (``rag_service.ingest.tables``)
    lead: str = ""

    @property
    def header_path(self) -> str:
        """Headers joined outermost first, e.g. ``"Guide > Install > Linux"`` (h1–h6)."""
        return " > ".join(self.headers[k] for k in HEADER_KEYS if k in self.headers)


@dataclass(slots=True)
class ChunkedDocument:
    """A chunker's output: kept chunks, and how many pieces the garbage filter dropped, by reason."""

    chunks: list[TextChunk]
    filtered: dict[str, int] = field(default_factory=dict)
    #: chunks mostly of text the embedding model cannot read (``model_window.UNREADABLE_SHARE``)
    unreadable: int = 0

    @property
    def filtered_total(self) -> int:
        """All pieces dropped by the garbage filter."""
        return sum(self.filtered.values())


class Chunker(Protocol):
    """Splits one document's text into chunks with exact character offsets."""

    def split(self, text: str) -> ChunkedDocument:
        """Return the chunks of ``text`` (possibly none) and the garbage-filter counts."""
        ...
