"""Choosing a chunker: strategy names, validated construction, and the settings fingerprint."""

from __future__ import annotations

from pathlib import Path

from rag_service.config import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import Chunker
from rag_service.ingest.markdown import MarkdownChunker
from rag_service.ingest.recursive import RecursiveChunker
from rag_service.ingest.sentence import SentenceChunker
from rag_service.ingest.spans import check_sizes
from rag_service.ingest.tokenchunk import TokenChunker, load_encoding
from rag_service.tokens import DEFAULT_ENCODING

STRATEGIES = ("markdown", "recursive", "sentence", "token")
#: ``(chunk_size, chunk_overlap)`` when not given; characters, except tokens for ``token``
_CHARS = (DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP)
DEFAULT_SIZES = {"markdown": _CHARS, "recursive": _CHARS, "sentence": _CHARS, "token": (256, 32)}
#: bump whenever a change to chunking logic changes the chunks of some text: stored fingerprints then
#: differ and documents are chunked again
CHUNKING_VERSION = 1
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})


def _resolve(strategy: str, chunk_size: int | None, chunk_overlap: int | None, min_chunk_chars: int) -> tuple[int, int]:
    if strategy not in STRATEGIES:
        raise ChunkingError(f"unknown chunking strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    default_size, default_overlap = DEFAULT_SIZES[strategy]
    size = default_size if chunk_size is None else chunk_size
    overlap = default_overlap if chunk_overlap is None else chunk_overlap
    if chunk_overlap is None and isinstance(size, int) and not isinstance(size, bool) and size > 0:
        overlap = min(default_overlap, size // 5)  # a chunk_size given alone: at most 20% overlap
    check_sizes(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars)
    return size, overlap


def make_chunker(
    strategy: str,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    min_chunk_chars: int = 50,
    encoding: str = DEFAULT_ENCODING,
) -> Chunker:
    """Build the chunker for ``strategy``; None sizes take the strategy's defaults (``DEFAULT_SIZES``).

    A ``chunk_size`` given without ``chunk_overlap`` gets ``min(default overlap, chunk_size // 5)``.

    Raises ChunkingError for an unknown strategy, ``chunk_size <= 0``, ``chunk_overlap < 0``,
    ``chunk_overlap >= chunk_size`` or, for ``token``, an encoding that cannot be loaded.
    """
    size, overlap = _resolve(strategy, chunk_size, chunk_overlap, min_chunk_chars)
    if strategy == "markdown":
        return MarkdownChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars)
    if strategy == "recursive":
        return RecursiveChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars)
    if strategy == "sentence":
        return SentenceChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars)
    return TokenChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, encoding=encoding)


def chunker_fingerprint(
    strategy: str,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    min_chunk_chars: int = 50,
    encoding: str = DEFAULT_ENCODING,
) -> str:
    """A short stable string naming the chunking of a document, e.g. ``"markdown:500:100:50:v1"``.

    Stored with each document: a different fingerprint means the document must be chunked again.
    Defaults are resolved first, so ``None`` and the explicit default agree. The encoding appears only
    for ``token``, the one strategy it affects (``"token:256:32:50:cl100k_base:v1"``).
    """
    size, overlap = _resolve(strategy, chunk_size, chunk_overlap, min_chunk_chars)
    if strategy == "token":
        load_encoding(encoding)
        return f"token:{size}:{overlap}:{min_chunk_chars}:{encoding}:v{CHUNKING_VERSION}"
    return f"{strategy}:{size}:{overlap}:{min_chunk_chars}:v{CHUNKING_VERSION}"


def strategy_for_path(path: Path) -> str:
    """The default strategy for a file: ``markdown`` for .md/.markdown/.mdx, else ``recursive``."""
    return "markdown" if path.suffix.lower() in MARKDOWN_SUFFIXES else "recursive"
