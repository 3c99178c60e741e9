"""Choosing a chunker: strategy names, validated sizes and construction (the fingerprint: ``fingerprint.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rag_service.errors import ChunkingError
from rag_service.ingest.asciidoc import AsciidocChunker
from rag_service.ingest.character import CharacterChunker
from rag_service.ingest.chunk import Chunker
from rag_service.ingest.code import CodeChunker
from rag_service.ingest.configfile import ConfigChunker
from rag_service.ingest.jsonchunk import JsonChunker
from rag_service.ingest.latex import LatexChunker
from rag_service.ingest.markdown import MarkdownChunker
from rag_service.ingest.recursive import RecursiveChunker
from rag_service.ingest.rst import RstChunker
from rag_service.ingest.sections import HtmlChunker, SemanticMarkdownChunker
from rag_service.ingest.semantic import SemanticChunker
from rag_service.ingest.sentence import SentenceChunker
from rag_service.ingest.spans import check_sizes
from rag_service.ingest.strategies import (
    DEFAULT_MIN_CHUNK_CHARS,
    DEFAULT_SIZES,
    OWN_SIZES,
    STRATEGIES,
    TABLE_STRATEGIES,
    list_strategies,
    recommend_strategy,
    resolve_sizes,
    resolve_strategy,
)
from rag_service.ingest.tokenchunk import TokenChunker
from rag_service.tokens import DEFAULT_ENCODING

if TYPE_CHECKING:
    from rag_service.embed import Embedder

__all__ = [
    "DEFAULT_MIN_CHUNK_CHARS",
    "DEFAULT_SIZES",
    "OWN_SIZES",
    "STRATEGIES",
    "checked_sizes",
    "configured_sizes",
    "list_strategies",
    "make_chunker",
    "recommend_strategy",
    "resolve_strategy",
]


def configured_sizes(strategy: str, *, chunk_size: int, chunk_overlap: int) -> tuple[int | None, int | None]:
    """``(chunk_size, chunk_overlap)`` to build ``strategy``'s chunker with from the character settings
    (``RAG_CHUNK_SIZE``, ``RAG_CHUNK_OVERLAP``): those, but None (its own defaults) for ``OWN_SIZES``."""
    if resolve_strategy(strategy) in OWN_SIZES:  # tokens, or whole definitions: not RAG_CHUNK_SIZE
        return None, None
    return chunk_size, chunk_overlap


def checked_sizes(
    strategy: str, chunk_size: int | None, chunk_overlap: int | None, min_chunk_chars: int
) -> tuple[int, int]:
    """``(chunk_size, chunk_overlap)`` of a resolved ``strategy``, None taking its defaults; checked.

    Raises ChunkingError for an unknown strategy or sizes that do not fit together.
    """
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
    table_rows: bool = False,
) -> Chunker:
    """Build the chunker for ``strategy``; None sizes take the strategy's defaults (``DEFAULT_SIZES``).

    ``auto`` picks by ``source`` (``recommend_strategy``); ``code`` takes its language from ``source``'s
    suffix, ``config`` its syntax and file name; ``semantic`` needs ``embedder``. A ``chunk_size`` given without
    ``chunk_overlap`` gets ``min(default overlap, chunk_size // 5)``.

    Raises ChunkingError for an unknown strategy, ``chunk_size <= 0``, ``chunk_overlap < 0``,
    ``chunk_overlap >= chunk_size``, ``token`` with an encoding that cannot be loaded, or ``semantic``
    without an embedder. ``table_rows`` cuts the tables of the section strategies between rows
    (``Settings.table_rows``).
    """
    strategy = resolve_strategy(strategy, source)
    size, overlap = checked_sizes(strategy, chunk_size, chunk_overlap, min_chunk_chars)
    if strategy == "token":
        return TokenChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, encoding=encoding)
    if strategy == "code":
        return CodeChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, source=source)
    if strategy == "config":
        return ConfigChunker(chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, source=source)
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
        "rst": RstChunker,
        "asciidoc": AsciidocChunker,
    }
    tables = {"table_rows": table_rows} if strategy in TABLE_STRATEGIES else {}
    return chunkers[strategy](chunk_size=size, chunk_overlap=overlap, min_chunk_chars=min_chunk_chars, **tables)
