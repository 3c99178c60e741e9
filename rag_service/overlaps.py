"""One document's overlapping results shown once, as one passage.

Splitters overlap their chunks (a sentence or two of the previous chunk starts the next), so the ``search``
preset, and parent presets on documents without sections (plain text, code, JSON), showed the shared text
twice, up to a tenth of the budget. Results are taken best first; a later result that overlaps (or touches) a
better one of the same document joins it: the better one's span grows to hold both, in document order, and
keeps its place, relevance and ``match_*``. Joined only where the two texts agree on the shared span, so
offsets that do not describe one document's text are left alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import replace

from rag_service.lines import lines_before, span_end_line
from rag_service.result import RetrievedChunk


def joined_overlaps(ranked: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """``ranked`` (best first) with each result that overlaps a better one of its document joined into it."""
    out: list[RetrievedChunk] = []
    for chunk in ranked:
        into = next((i for i, kept in enumerate(out) if _joinable(kept, chunk)), None)
        if into is None:
            out.append(chunk)
            continue
        joined = _joined(out[into], chunk)
        while (other := _overlapping(out, joined, besides=into)) is not None:
            joined = _joined(joined, out.pop(other))  # the grown span reached another result: one passage
            into -= other < into
        out[into] = joined
    return out


def first_passages(pick: Callable[[int], Sequence[RetrievedChunk]], count: int, available: int) -> list[RetrievedChunk]:
    """The first results ``pick(k)`` gives (its first ``k`` of ``available``, each ``k`` extending the last) that show
    ``count`` passages once overlapping results are joined, or all when they show fewer: a preset's ``max_chunks``
    counts what is shown, not results a join folds away. More are picked only where results overlapped."""
    k = count
    while True:
        taken = list(pick(k))
        shown = len(joined_overlaps(taken))
        if shown >= count or k >= available:
            return taken
        k += count - shown  # each result more shows at most one passage more


def _overlapping(out: list[RetrievedChunk], chunk: RetrievedChunk, *, besides: int) -> int | None:
    return next((i for i, kept in enumerate(out) if i != besides and _joinable(chunk, kept)), None)


def _joinable(kept: RetrievedChunk, other: RetrievedChunk) -> bool:
    if (kept.collection, kept.document_id) != (other.collection, other.document_id):
        return False
    if any(len(c.content) != c.end_char - c.start_char for c in (kept, other)):
        return False
    lo, hi = max(kept.start_char, other.start_char), min(kept.end_char, other.end_char)
    if lo > hi:
        return False
    shared = kept.content[lo - kept.start_char : hi - kept.start_char]
    return shared == other.content[lo - other.start_char : hi - other.start_char] and len(shared) == hi - lo


def _joined(kept: RetrievedChunk, other: RetrievedChunk) -> RetrievedChunk:
    before = other.content[: max(kept.start_char - other.start_char, 0)]
    after = other.content[len(other.content) - max(other.end_char - kept.end_char, 0) :]
    content = before + kept.content + after
    first = kept.start_line - lines_before(before, len(before)) if kept.start_line is not None else None
    return replace(
        kept,
        content=content,
        start_char=min(kept.start_char, other.start_char),
        end_char=max(kept.end_char, other.end_char),
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
        start_line=first,
        end_line=span_end_line(first, content) if first is not None else None,
    )
