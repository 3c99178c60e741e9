"""Chunks cut to what the embedding model reads (``model_window``): every character of a chunk is in its vector.

A chunk whose embedded text (its prefix, ``db.chunk_text.embedded_text``, then its content) is longer than the
model's window is cut into consecutive chunks that fit, at the coarsest break that makes them fit
(``recursive_spans``, measured in the model's tokens), each with the chunk's headers, parent and metadata and
exact offsets. English prose at the default sizes is far inside the window and never cut; Cyrillic, Arabic, CJK
and Korean text is. ``code`` chunks are left whole: a definition is their unit, and its signature and docstring
come first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rag_service.ingest.chunk import ChunkedDocument, TextChunk
from rag_service.ingest.recursive import recursive_spans
from rag_service.model_window import ModelWindow
from rag_service.tokens import count_tokens

#: a prefix (title, header path, lead) leaving fewer tokens than this for the text: the chunk is left as it is
MIN_TEXT_TOKENS = 64
#: the strategies whose chunks are never cut to the window
WHOLE_STRATEGIES = frozenset({"code"})


def fit_to_window(
    text: str, chunked: ChunkedDocument, window: ModelWindow, prefix_of: Callable[[TextChunk], str]
) -> int:
    """Cut ``chunked``'s chunks of ``text`` whose embedded text is longer than ``window`` (in place; chunks are
    numbered again in order) and return how many were cut. ``prefix_of``: what is embedded before a chunk's text."""
    chunks = chunked.chunks
    prefixes = [prefix_of(chunk) for chunk in chunks]
    sizes = window.count([chunk.content for chunk in chunks])
    prefix_sizes = window.count(prefixes)
    budget = window.max_tokens - window.special
    fitted: list[TextChunk] = []
    cut = 0
    for chunk, size, prefix_size in zip(chunks, sizes, prefix_sizes, strict=True):
        room = budget - prefix_size
        if size <= room or room < MIN_TEXT_TOKENS:
            fitted.append(chunk)
            continue
        cut += 1
        fitted.extend(_cut(text, chunk, room, window.count))
    if cut:
        chunked.chunks = [replace(chunk, chunk_index=index) for index, chunk in enumerate(fitted)]
    return cut


def _cut(text: str, chunk: TextChunk, room: int, count: Callable[[list[str]], list[int]]) -> list[TextChunk]:
    """``chunk`` as consecutive chunks of at most ``room`` tokens each (a fifth of it overlapping)."""
    spans = recursive_spans(
        text,
        chunk.start_char,
        chunk.end_char,
        chunk_size=room,
        chunk_overlap=room // 5,
        length=lambda piece: count([piece])[0],
    )
    return [
        replace(
            chunk,
            content=text[start:end],
            start_char=start,
            end_char=end,
            token_count=count_tokens(text[start:end]),
            metadata=dict(chunk.metadata),
        )
        for start, end in spans
    ]
