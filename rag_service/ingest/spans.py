"""Span arithmetic shared by the chunkers.

A span is a half-open ``(start, end)`` range of character offsets into the text given to ``split()``.
Chunkers cut, merge and trim spans and only slice the text at the very end, so ``text[start:end]`` is
the chunk content even when a passage occurs twice in the document.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable

from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import TextChunk
from rag_service.tokens import count_tokens

Span = tuple[int, int]
#: a span with its measured length: ``(start, end, length)``
Piece = tuple[int, int, int]
#: measures a piece of text: characters (``len``) or tokens
LengthFunction = Callable[[str], int]


def check_sizes(*, chunk_size: int, chunk_overlap: int, min_chunk_chars: int) -> None:
    """Raise ChunkingError unless ``0 <= chunk_overlap < chunk_size`` and ``min_chunk_chars >= 0``."""
    for name, value in (
        ("chunk_size", chunk_size),
        ("chunk_overlap", chunk_overlap),
        ("min_chunk_chars", min_chunk_chars),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ChunkingError(f"{name} ({value!r}) must be an integer")
    if chunk_size <= 0:
        raise ChunkingError(f"chunk_size ({chunk_size}) must be positive, e.g. 500")
    if chunk_overlap < 0:
        raise ChunkingError(f"chunk_overlap ({chunk_overlap}) must be zero or positive")
    if chunk_overlap >= chunk_size:
        raise ChunkingError(f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})")
    if min_chunk_chars < 0:
        raise ChunkingError(f"min_chunk_chars ({min_chunk_chars}) must be zero or positive")


def trim_span(text: str, start: int, end: int) -> Span | None:
    """Shrink ``(start, end)`` past leading and trailing whitespace; None if nothing else is left."""
    piece = text[start:end]
    left = piece.lstrip()
    if not left:
        return None
    return start + len(piece) - len(left), end - (len(left) - len(left.rstrip()))


def trim_lines(text: str, start: int, end: int) -> Span | None:
    """``trim_span``, but keeping the indentation of a first line that starts inside the span: only blank lines
    are trimmed before it (code, whose first line read de-indented against the rest). None if only whitespace."""
    trimmed = trim_span(text, start, end)
    if trimmed is None:
        return None
    line = text.rfind("\n", 0, trimmed[0]) + 1
    return (line if line >= start else trimmed[0]), trimmed[1]


def cut_after(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[Span]:
    """Cut ``(start, end)`` after every match of ``pattern``: contiguous spans covering it exactly."""
    spans: list[Span] = []
    cursor = start
    for match in pattern.finditer(text, start, end):
        cut = match.end()
        if cut >= end:
            break
        if cut > cursor:
            spans.append((cursor, cut))
            cursor = cut
    if cursor < end:
        spans.append((cursor, end))
    return spans


def merge_pieces(pieces: Iterable[Piece], *, chunk_size: int, chunk_overlap: int) -> list[Span]:
    """Greedily join contiguous pieces into spans of at most ``chunk_size``.

    Each span after the first starts with whole pieces from the end of the previous one, at most
    ``chunk_overlap`` long. A single piece longer than ``chunk_size`` becomes a span of its own.
    """
    spans: list[Span] = []
    window: deque[Piece] = deque()
    total = 0
    for piece in pieces:
        size = piece[2]
        if window and total + size > chunk_size:
            spans.append((window[0][0], window[-1][1]))
            while window and (total > chunk_overlap or total + size > chunk_size):
                total -= window.popleft()[2]
        window.append(piece)
        total += size
    if window:
        spans.append((window[0][0], window[-1][1]))
    return spans


def make_chunk(
    text: str,
    span: Span,
    *,
    index: int,
    chunk_type: str,
    headers: dict[str, str] | None = None,
    parent: tuple[Span, str] | None = None,
    lead: str = "",
) -> TextChunk:
    """Build the TextChunk for ``span`` (token count in cl100k_base, as everywhere in rag_service).

    ``parent`` is the parent's span and its text, sliced once by the caller: a section's children share one
    string (as copies, a 200 KB section's 500 children held 100 MB, a 1 MB one's 2.5 GB).
    """
    content = text[span[0] : span[1]]
    return TextChunk(
        content=content,
        start_char=span[0],
        end_char=span[1],
        chunk_index=index,
        chunk_type=chunk_type,
        token_count=count_tokens(content),
        headers=dict(headers or {}),
        parent_content=None if parent is None else parent[1],
        parent_start=None if parent is None else parent[0][0],
        parent_end=None if parent is None else parent[0][1],
        lead=lead,
    )


#: at most this many characters of referenced values lead a child (a table of a hundred references is no lead)
MAX_REFERENCED_CHARS = 200


def referenced_values(text: str, values: dict[str, str], reference: re.Pattern[str]) -> str:
    """The values of ``values`` that ``text`` refers to (group 1 of ``reference`` names one), each once, in order,
    joined by ``, `` up to ``MAX_REFERENCED_CHARS``: what a chunk says through a file's substitutions or attributes."""
    shown: list[str] = []
    size = 0
    for match in reference.finditer(text):
        value = values.get(match[1])
        if value and value not in shown and size + len(value) <= MAX_REFERENCED_CHARS:
            shown.append(value)
            size += len(value) + 2
    return ", ".join(shown)


def joined_lead(*parts: str) -> str:
    """A child's lead of several parts (a directive's name, referenced values), the empty ones left out."""
    return " · ".join(part for part in parts if part)
