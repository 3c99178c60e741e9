"""Strategy names, what each does, their default sizes, which one ``auto`` picks; no chunker code."""

from __future__ import annotations

from pathlib import Path

from rag_service.config import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from rag_service.ingest.filetypes import recommend_strategy

__all__ = [
    "AUTO",
    "DEFAULT_MIN_CHUNK_CHARS",
    "DEFAULT_SIZES",
    "OWN_SIZES",
    "STRATEGIES",
    "STRATEGY_DESCRIPTIONS",
    "TABLE_STRATEGIES",
    "list_strategies",
    "recommend_strategy",
    "resolve_sizes",
    "resolve_strategy",
]

#: the strategies that cut a markdown table's children between its rows when ``Settings.table_rows`` is on
TABLE_STRATEGIES = frozenset({"markdown", "html"})

#: every strategy, with what it does (``list_strategies``); ``auto`` picks one per file
STRATEGY_DESCRIPTIONS = {
    "character": "fixed windows of characters",
    "token": "fixed windows of tokens (cl100k_base)",
    "sentence": "whole sentences up to the size",
    "recursive": "paragraphs, lines, sentences, words: the coarsest cut that fits",
    "markdown": "h1-h4 sections as parents, their recursive pieces as children",
    "semantic": "breaks where embedding similarity between neighbouring sentences drops",
    "html": "DOM sections at h1-h6 as parents, header path from h1-h6",
    "json": "each chunk one valid JSON value, its JSON path as the header path",
    "latex": "sections as headers; math environments never split",
    "rst": "reStructuredText titles as headers: sections as parents, their recursive pieces as children",
    "asciidoc": "AsciiDoc titles (== Section) as headers: sections as parents, their recursive pieces as children",
    "semantic-markdown": "whole header sections merged while they fit",
    "code": "functions and classes whole where they fit; module > class > function",
    "config": "TOML tables and YAML keys as sections: file > table (or key > nested key)",
}
STRATEGIES = tuple(STRATEGY_DESCRIPTIONS)
AUTO = "auto"

#: ``(chunk_size, chunk_overlap)`` of each strategy when not given; characters, except tokens for
#: ``token``. Every chunker's constructor and ``make_chunker`` take their defaults from here.
DEFAULT_SIZES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(STRATEGIES, (DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_OVERLAP)),
    "token": (256, 32),
    # one JSON value per chunk, and groups between topic breaks: neither overlaps
    "json": (DEFAULT_CHUNK_SIZE, 0),
    "semantic": (DEFAULT_CHUNK_SIZE, 0),
    # a definition is the unit: most functions are longer than 500 characters
    "code": (1500, 0),
}
#: strategies whose sizes come from ``DEFAULT_SIZES``, not from the character settings (RAG_CHUNK_SIZE)
OWN_SIZES = frozenset({"token", "code"})
#: a piece with less real text than this many characters is dropped as garbage (a markdown section
#: that short joins a neighbour)
DEFAULT_MIN_CHUNK_CHARS = 50


def list_strategies() -> list[str]:
    """The names ``--strategy`` and ``index_paths(strategy=)`` accept, ``auto`` (the default) last."""
    return [*STRATEGIES, AUTO]


def resolve_sizes(strategy: str, chunk_size: int | None, chunk_overlap: int | None) -> tuple[int, int]:
    """``(chunk_size, chunk_overlap)`` with ``DEFAULT_SIZES[strategy]`` for the ones not given (unchecked).

    A ``chunk_size`` given without ``chunk_overlap`` gets ``min(default overlap, chunk_size // 5)``.
    """
    default_size, default_overlap = DEFAULT_SIZES[strategy]
    size = default_size if chunk_size is None else chunk_size
    overlap = default_overlap if chunk_overlap is None else chunk_overlap
    if chunk_overlap is None and isinstance(size, int) and not isinstance(size, bool) and size > 0:
        overlap = min(default_overlap, size // 5)  # a chunk_size given alone: at most 20% overlap
    return size, overlap


def resolve_strategy(strategy: str | None, source: str | Path = "") -> str:
    """``strategy`` itself, or for ``auto``/None the one ``recommend_strategy`` picks for ``source``."""
    if strategy is None or strategy == AUTO:
        return recommend_strategy(Path(source)) if source else "recursive"
    return strategy
