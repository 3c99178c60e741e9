"""Strategy names, what each does, and which one ``auto`` picks; no chunker code (cheap to import)."""

from __future__ import annotations

from pathlib import Path

from rag_service.ingest.filetypes import recommend_strategy

__all__ = ["AUTO", "STRATEGIES", "STRATEGY_DESCRIPTIONS", "list_strategies", "recommend_strategy", "resolve_strategy"]

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
    "semantic-markdown": "whole header sections merged while they fit",
    "code": "functions and classes whole where they fit; module > class > function",
}
STRATEGIES = tuple(STRATEGY_DESCRIPTIONS)
AUTO = "auto"


def list_strategies() -> list[str]:
    """The names ``--strategy`` and ``index_paths(strategy=)`` accept, ``auto`` (the default) last."""
    return [*STRATEGIES, AUTO]


def resolve_strategy(strategy: str | None, source: str | Path = "") -> str:
    """``strategy`` itself, or for ``auto``/None the one ``recommend_strategy`` picks for ``source``."""
    if strategy is None or strategy == AUTO:
        return recommend_strategy(Path(source)) if source else "recursive"
    return strategy
