"""Choosing a chunker: strategy names, validated construction, and the settings fingerprint."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rag_service.errors import ChunkingError
from rag_service.ingest.character import CharacterChunker
from rag_service.ingest.chunk import Chunker
from rag_service.ingest.code import CodeChunker
from rag_service.ingest.jsonchunk import JsonChunker
from rag_service.ingest.latex import LatexChunker
from rag_service.ingest.markdown import MarkdownChunker
from rag_service.ingest.recursive import RecursiveChunker
from rag_service.ingest.sections import HtmlChunker, SemanticMarkdownChunker
from rag_service.ingest.semantic import SemanticChunker
from rag_service.ingest.sentence import SentenceChunker
from rag_service.ingest.spans import check_sizes
from rag_service.ingest.strategies import (
    DEFAULT_MIN_CHUNK_CHARS,
    DEFAULT_SIZES,
    OWN_SIZES,
    STRATEGIES,
    list_strategies,
    recommend_strategy,
    resolve_sizes,
    resolve_strategy,
)
from rag_service.ingest.tokenchunk import TokenChunker, load_encoding
from rag_service.tokens import DEFAULT_ENCODING

if TYPE_CHECKING:
    from rag_service.embed import Embedder

__all__ = [
    "CHUNKING_VERSION",
    "DEFAULT_MIN_CHUNK_CHARS",
    "DEFAULT_SIZES",
    "OWN_SIZES",
    "STRATEGIES",
    "chunker_fingerprint",
    "list_strategies",
    "make_chunker",
    "recommend_strategy",
    "resolve_strategy",
]

#: bump whenever a change to chunking logic changes the chunks of some text: stored fingerprints then
#: differ and documents are chunked again
CHUNKING_VERSION = 1


def _resolve(strategy: str, chunk_size: int | None, chunk_overlap: int | None, min_chunk_chars: int) -> tuple[int, int]:
    if strategy not in STRATEGIES:
        raise ChunkingError(f"unknown chunking strategy {strategy!r}; use one of {', '.join(list_strategies())}")
    size, overlap = resolve_sizes(strategy, chunk_size, chunk_overlap)
    check_sizes(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars)
    return size, overlap


def make_chunker(
    strategy: str,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    encoding: str = DEFAULT_ENCODING,
    source: str = "",
    embedder: Embedder | None = None,
) -> Chunker:
    """Build the chunker for ``strategy``; None sizes take the strategy's defaults (``DEFAULT_SIZES``).

    ``auto`` picks by ``source`` (``recommend_strategy``); ``code`` takes its language from ``source``'s
    suffix; ``semantic`` needs ``embedder``. A ``chunk_size`` given without ``chunk_overlap`` gets
    ``min(default overlap, chunk_size // 5)``.

    Raises ChunkingError for an unknown strategy, ``chunk_size <= 0``, ``chunk_overlap < 0``,
    ``chunk_overlap >= chunk_size``, ``token`` with an encoding that cannot be loaded, or ``semantic``
    without an embedder.
    """
    strategy = resolve_strategy(strategy, source)
    size, overlap = _resolve(strategy, chunk_size, chunk_overlap, min_chunk_chars)
    if strategy == "token":
        return TokenChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, encoding=encoding)
    if strategy == "code":
        return CodeChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, source=source)
    if strategy == "semantic":
        return SemanticChunker(
            chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, embedder=embedder
        )
    chunkers: dict[str, Callable[..., Chunker]] = {
        "character": CharacterChunker,
        "markdown": MarkdownChunker,
        "recursive": RecursiveChunker,
        "sentence": SentenceChunker,
        "html": HtmlChunker,
        "semantic-markdown": SemanticMarkdownChunker,
        "json": JsonChunker,
        "latex": LatexChunker,
    }
    return chunkers[strategy](chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars)


def chunker_fingerprint(
    strategy: str,
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    encoding: str = DEFAULT_ENCODING,
) -> str:
    """A short stable string naming the chunking of a document, e.g. ``"markdown:500:100:50:v1"``.

    Stored with each document: a different fingerprint means the document must be chunked again.
    Defaults are resolved first, so ``None`` and the explicit default agree. The encoding appears only
    for ``token``, the one strategy it affects (``"token:256:32:50:cl100k_base:v1"``).
    """
    strategy = resolve_strategy(strategy)
    size, overlap = _resolve(strategy, chunk_size, chunk_overlap, min_chunk_chars)
    if strategy == "token":
        load_encoding(encoding)
        return f"token:{size}:{overlap}:{min_chunk_chars}:{encoding}:v{CHUNKING_VERSION}"
    return f"{strategy}:{size}:{overlap}:{min_chunk_chars}:v{CHUNKING_VERSION}"
