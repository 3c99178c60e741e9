"""The ``token`` strategy: windows of ``chunk_size`` tokens, overlapping by ``chunk_overlap`` tokens.

The text is encoded once; each token's byte length gives byte offsets, which map to character offsets.
A token boundary that falls inside a multi-byte UTF-8 character is moved forward to the character's
end, so the character belongs wholly to the earlier window and chunks hold whole characters.
``token_count`` is still counted in cl100k_base (the measure used everywhere), whatever ``encoding``
the windows are cut in.
"""

from __future__ import annotations

from itertools import accumulate

from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import TEXT, ChunkedDocument
from rag_service.ingest.garbage import empty_counts, filter_plain_spans
from rag_service.ingest.spans import Span, check_sizes, make_chunk, trim_span
from rag_service.ingest.strategies import DEFAULT_MIN_CHUNK_CHARS, resolve_sizes
from rag_service.tokens import DEFAULT_ENCODING, get_encoding


def load_encoding(name: str) -> None:
    """Raise ChunkingError if the tiktoken encoding ``name`` cannot be loaded (offline)."""
    try:
        get_encoding(name)
    except (ValueError, KeyError, OSError) as err:
        raise ChunkingError(
            f"tiktoken encoding {name!r} is not available offline ({type(err).__name__}); use cl100k_base or o200k_base"
        ) from None


def token_windows(text: str, *, chunk_size: int, chunk_overlap: int, encoding: str) -> list[Span]:
    """Character spans of consecutive token windows covering ``text`` (untrimmed, maybe empty)."""
    enc = get_encoding(encoding)
    tokens = enc.encode(text, disallowed_special=())
    if not tokens:
        return []
    sizes: dict[int, int] = {}
    for token in set(tokens):
        sizes[token] = len(enc.decode_single_token_bytes(token))
    byte_ends = [0, *accumulate(sizes[t] for t in tokens)]
    windows: list[tuple[int, int]] = []
    step = chunk_size - chunk_overlap
    for first in range(0, len(tokens), step):
        last = min(first + chunk_size, len(tokens))
        windows.append((byte_ends[first], byte_ends[last]))
        if last == len(tokens):
            break
    if text.isascii():
        return windows
    # lone surrogates cannot be UTF-8; tiktoken encodes each as U+FFFD, also three bytes
    data = text.encode("utf-8", "surrogatepass")
    to_char = _byte_to_char(data, {b for window in windows for b in window})
    return [(to_char[start], to_char[end]) for start, end in windows]


def _byte_to_char(data: bytes, offsets: set[int]) -> dict[int, int]:
    """Map each byte offset, moved forward to a character boundary, to its character offset."""
    mapping: dict[int, int] = {}
    byte_pos = char_pos = 0
    for offset in sorted(offsets):
        boundary = offset
        while boundary < len(data) and data[boundary] & 0xC0 == 0x80:  # a continuation byte
            boundary += 1
        char_pos += len(data[byte_pos:boundary].decode("utf-8", "surrogatepass"))
        byte_pos = boundary
        mapping[offset] = char_pos
    return mapping


class TokenChunker:
    """Chunker for the ``token`` strategy: ``chunk_size``/``chunk_overlap`` are tokens of ``encoding``."""

    def __init__(
        self,
        *,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
        encoding: str = DEFAULT_ENCODING,
    ) -> None:
        chunk_size, chunk_overlap = resolve_sizes("token", chunk_size, chunk_overlap)
        check_sizes(chunk_size=chunk_size, chunk_overlap=chunk_overlap, min_chunk_chars=min_chunk_chars)
        load_encoding(encoding)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.min_chunk_chars = min_chunk_chars
        self.encoding = encoding

    def split(self, text: str) -> ChunkedDocument:
        """Split ``text`` into token windows with exact character offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        windows = token_windows(
            text, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, encoding=self.encoding
        )
        spans: list[Span] = []
        for start, end in windows:
            span = trim_span(text, start, end)
            # a window whose new tokens are all whitespace trims to a part of the previous one
            if span is not None and not (spans and span[1] <= spans[-1][1]):
                spans.append(span)
        counts = empty_counts()
        kept = filter_plain_spans(text, spans, min_chunk_chars=self.min_chunk_chars, counts=counts)
        return ChunkedDocument(
            [make_chunk(text, span, index=i, chunk_type=TEXT) for i, span in enumerate(kept)], counts
        )
