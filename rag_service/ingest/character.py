"""The ``character`` strategy: fixed windows of ``chunk_size`` characters, ``chunk_overlap`` shared.

No structure is looked at: window ``i`` starts at ``i * (chunk_size - chunk_overlap)``. Each window
is trimmed of surrounding whitespace; a window whose new characters are all whitespace is dropped.
"""

from __future__ import annotations

from typing import ClassVar

from rag_service.ingest.chunk import TEXT, ChunkedDocument
from rag_service.ingest.garbage import empty_counts, filter_plain_spans
from rag_service.ingest.recursive import SizedChunker
from rag_service.ingest.spans import Span, make_chunk, trim_span


def character_windows(size: int, *, chunk_size: int, chunk_overlap: int) -> list[Span]:
    """Windows covering ``[0, size)``; the last one ends at ``size``."""
    windows: list[Span] = []
    for start in range(0, size, chunk_size - chunk_overlap):
        windows.append((start, min(start + chunk_size, size)))
        if start + chunk_size >= size:
            break
    return windows


class CharacterChunker(SizedChunker):
    """Chunker for the ``character`` strategy (``TEXT`` chunks)."""

    strategy: ClassVar[str] = "character"

    def split(self, text: str) -> ChunkedDocument:
        """Cut ``text`` into overlapping character windows with exact offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        spans: list[Span] = []
        for start, end in character_windows(len(text), chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap):
            span = trim_span(text, start, end)
            if span is not None and not (spans and span[1] <= spans[-1][1]):
                spans.append(span)
        counts = empty_counts()
        kept = filter_plain_spans(text, spans, min_chunk_chars=self.min_chunk_chars, counts=counts)
        return ChunkedDocument([make_chunk(text, s, index=i, chunk_type=TEXT) for i, s in enumerate(kept)], counts)
