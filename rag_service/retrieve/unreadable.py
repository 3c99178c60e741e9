"""A query the embedding model cannot read: its vector arm is left out, and the call says so.

MiniLM's vocabulary has no Thai and lacks most Han characters and emoji: such text becomes ``[UNK]`` tokens and
every such text nearly one vector, so a Chinese query matched a Thai page at a calibrated 96% and an emoji query
passed the ``agent`` floor (audit 54a). When most of a query's tokens are unknown to the model, the call searches
by its words alone (``keyword_text`` reads those scripts) and ``metrics.degraded`` names the fix.

A query longer than the model's window is embedded from its head only: a question after a paragraph of background
or a pasted traceback was never embedded, silently (audit 56a, D3). ``retrieve.focus`` cuts such a query to its
question, fitted to the window ``query_window`` gives; ``window_note`` says how much was read of one still past it
(code or machine text alone, searched as written).
"""

from __future__ import annotations

from rag_service.embed import Embedder
from rag_service.model_window import UNREADABLE_SHARE, model_window
from rag_service.result import RetrievalMetrics
from rag_service.retrieve.focus import Window


def readable_embedder(query: str, embedder: Embedder, metrics: RetrievalMetrics) -> Embedder | None:
    """``embedder``, or None (with a ``metrics.degraded`` line) when most of ``query`` is text it cannot read."""
    if query.isascii():  # every ASCII character is in the vocabularies this can tell
        return embedder
    window = model_window(embedder)
    if window is None or window.unknown is None:
        return embedder
    share = window.unknown([query])[0]
    if share < UNREADABLE_SHARE:
        return embedder
    metrics.degrade(
        "embed",
        f"{share:.0%} of the query is text the embedding model {embedder.model_id} cannot read (its vocabulary "
        "lacks the script or the symbols): searched by its words only; a multilingual RAG_EMBEDDING_MODEL reads it",
    )
    return None


def query_window(embedder: Embedder | None) -> Window | None:
    """``embedder``'s token count and how many tokens of a query it reads, or None (no embedder, or no window)."""
    window = model_window(embedder) if embedder is not None else None
    return None if window is None else (window.count, window.max_tokens - window.special)


def window_note(query: str, embedder: Embedder) -> str | None:
    """One line when ``query`` is longer than ``embedder``'s window (how much of it the vector arm read), else None."""
    window = model_window(embedder)
    if window is None:
        return None
    room = window.max_tokens - window.special
    if len(query) <= room:  # a word piece is at least one character: it fits
        return None
    tokens = window.count([query])[0]
    if tokens <= room:
        return None
    return (
        f"the query is {tokens} tokens and the embedding model {embedder.model_id} reads {room}: the vector arm "
        f"searched its first {room / tokens:.0%} only; ask the question alone, or put it first"
    )
