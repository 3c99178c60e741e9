"""The ``recursive`` strategy: split at the coarsest separator that makes pieces fit, then merge.

Separators, coarsest first: blank line (paragraph), line break, sentence end (``.``, ``!`` or ``?``
followed by whitespace, or a full-width ``。！？；．``, none needed), clause (``，``, ``、``), whitespace (word), and
finally fixed runs of characters (``rag_service.text_breaks``). A piece keeps the
separator that ends it, so pieces are contiguous and a chunk is always one exact slice of the text.
The text is taken as plain (YAML, config files, ``.txt``): the garbage filter drops pieces of only
blank or markup lines, but a ``# comment`` line is content, not a markdown header.
"""

from __future__ import annotations

import re
from typing import ClassVar

from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.garbage import empty_counts, filter_plain_spans
from rag_service.ingest.spans import (
    LengthFunction,
    Piece,
    Span,
    check_sizes,
    cut_after,
    make_chunk,
    merge_pieces,
    trim_span,
)
from rag_service.ingest.strategies import DEFAULT_MIN_CHUNK_CHARS, resolve_sizes
from rag_service.text_breaks import CLAUSE_BREAK, LINE_BREAK, PARAGRAPH_BREAK, SENTENCE_END, WORD_BREAK

SEPARATORS: tuple[re.Pattern[str], ...] = (PARAGRAPH_BREAK, LINE_BREAK, SENTENCE_END, CLAUSE_BREAK, WORD_BREAK)


def recursive_pieces(
    text: str, start: int, end: int, *, chunk_size: int, chunk_overlap: int, length: LengthFunction = len
) -> list[Piece]:
    """Contiguous pieces covering ``[start, end)``, each at most ``chunk_size`` long where possible.

    A span that does not fit is cut at the coarsest separator it contains; a run with no separator is
    cut into short character runs, small enough that overlap still works in whole pieces.
    """
    by_chars = length is len
    unit = max(1, min(chunk_size, chunk_overlap or chunk_size) // 8)
    pieces: list[Piece] = []

    def measure(start: int, end: int) -> int:
        if by_chars:
            return end - start
        # Tokens of consecutive pieces add up when each is measured without its trailing whitespace
        # (" word" is one token), plus one for a line break, which is a token of its own.
        piece = text[start:end]
        body = piece.rstrip()
        return length(body) + (1 if "\n" in piece[len(body) :] else 0)

    def refine(start: int, end: int, level: int, known: int | None) -> None:
        size = measure(start, end) if known is None else known
        if size <= chunk_size:
            pieces.append((start, end, size))
        elif level < len(SEPARATORS):
            parts = cut_after(text, start, end, SEPARATORS[level])
            for s, e in parts:
                refine(s, e, level + 1, size if len(parts) == 1 else None)
        elif by_chars:
            pieces.extend((s, min(s + unit, end), min(unit, end - s)) for s in range(start, end, unit))
        else:
            for s in range(start, end, unit):
                e = min(s + unit, end)
                size = measure(s, e)
                if size <= chunk_size or e - s == 1:
                    pieces.append((s, e, size))
                else:  # characters longer than a tiny chunk_size: one piece each
                    pieces.extend((i, i + 1, measure(i, i + 1)) for i in range(s, e))

    refine(start, end, 0, None)
    return pieces


def recursive_spans(
    text: str, start: int, end: int, *, chunk_size: int, chunk_overlap: int, length: LengthFunction = len
) -> list[Span]:
    """Trimmed spans of the recursive split of ``[start, end)``, in document order."""
    pieces = recursive_pieces(text, start, end, chunk_size=chunk_size, chunk_overlap=chunk_overlap, length=length)
    merged = merge_pieces(pieces, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
    return [span for s, e in merged if (span := trim_span(text, s, e)) is not None]


class SizedChunker:
    """Base of the chunkers that split by size: validated ``chunk_size``/``chunk_overlap`` measured by
    ``length`` (``len`` for characters, or any function of the text, e.g. a token count) and the
    garbage filter's minimum. Sizes not given are the ``strategy``'s (``DEFAULT_SIZES``). ``table_rows``:
    ``Settings.table_rows``, for the strategies that read it."""

    strategy: ClassVar[str] = "recursive"

    def __init__(
        self,
        *,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
        length: LengthFunction = len,
        table_rows: bool = False,
    ) -> None:
        chunk_size, chunk_overlap = resolve_sizes(self.strategy, chunk_size, chunk_overlap)
        check_sizes(chunk_size=chunk_size, chunk_overlap=chunk_overlap, min_chunk_chars=min_chunk_chars)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.min_chunk_chars = min_chunk_chars
        self.length = length
        #: the section strategies (``TABLE_STRATEGIES``) cut a markdown table's children between its rows
        self.table_rows = table_rows


class RecursiveChunker(SizedChunker):
    """Chunker for the ``recursive`` strategy: flat chunks of at most ``chunk_size`` (``TEXT``)."""

    strategy: ClassVar[str] = "recursive"

    def split(self, text: str) -> ChunkedDocument:
        """Split ``text`` into overlapping chunks with exact offsets; drop garbage pieces."""
        whole = trim_span(text, 0, len(text))
        if whole is None:
            return ChunkedDocument([], {})
        spans = recursive_spans(
            text,
            *whole,
            chunk_size=self.chunk_size,
            chunk_overlap=self.chunk_overlap,
            length=self.length,
        )
        counts = empty_counts()
        # YAML, config, plain text: ``# a comment`` is no header
        kept = filter_plain_spans(text, spans, min_chunk_chars=self.min_chunk_chars, counts=counts)
        chunks: list[TextChunk] = [make_chunk(text, span, index=i, chunk_type=TEXT) for i, span in enumerate(kept)]
        return ChunkedDocument(chunks, counts)
