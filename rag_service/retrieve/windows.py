"""Fitting expanded sections into the token budget: a parent too large for its share becomes a window.

The formatter admits results whole while they fit and drops the rest, so a few long sections used
to crowd out every other result (``max_chunks=10`` gave four results on real documentation). Here
the budget left after the layout's own lines is shared by water-filling: results smaller than an
equal share keep their size, and each parent above the common level is cut to a window of that many
tokens around the child that matched, never smaller than the child itself (when even the children
do not fit, the formatter drops the least relevant, as it does for children). A window is a span of
the parent, so its text is still ``document[start_char:end_char]``; ``match_start``/``match_end``
keep the matched child's span.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from rag_service.format import layout_overhead
from rag_service.lines import lines_before, span_end_line
from rag_service.result import RetrievedChunk
from rag_service.text_breaks import CLAUSE_BREAK, PARAGRAPH_BREAK, SENTENCE_END, WORD_BREAK
from rag_service.tokens import get_encoding

TokenCounter = Callable[[str], int]
#: where a window may start or end, most wanted first: a paragraph break, a sentence's end, a line break (the bare
#: line break: a window keeps a line's indentation), a clause's end (Chinese, Japanese: ``，``), a space. Hard-wrapped
#: prose breaks lines mid-sentence, so a sentence comes before a line; a paragraph on one line has no line break at
#: all; a long sentence has words (a window began "fer fine-tuning" and ended "143 (SI")
_EDGES = (PARAGRAPH_BREAK, SENTENCE_END, re.compile(r"\n"), CLAUSE_BREAK, WORD_BREAK)


def _start_edge(text: str, lo: int, hi: int, default: int) -> int:
    """Where a window starting in ``[lo, hi]`` should start: after the last edge ending there, else ``default``."""
    for edge in _EDGES:
        found = [m.end() for m in edge.finditer(text, lo, hi)]
        if found:
            return found[-1]
    return default


def _end_edge(text: str, lo: int, hi: int, default: int) -> int:
    """Where a window ending in ``[lo, hi]`` should end: at the last edge in it (after a sentence's mark), else
    ``default``."""
    for edge in _EDGES:
        found = [m.start() + len(m.group().rstrip()) for m in edge.finditer(text, lo, hi)]
        if found:
            return found[-1]
    return default


def water_level(sizes: Sequence[int], budget: int) -> int:
    """The largest level ``L`` with ``sum(min(size, L)) <= budget`` (``max(sizes)`` when all fit)."""
    if sum(sizes) <= budget:
        return max(sizes, default=0)
    remaining, left = budget, len(sizes)
    for size in sorted(sizes):
        share = remaining // left
        if size > share:
            return share
        remaining -= size
        left -= 1
    return max(sizes, default=0)


def window_span(start: int, end: int, match_start: int, match_end: int, text: str, chars: int) -> tuple[int, int]:
    """A span of about ``chars`` characters inside ``[start, end)`` that holds ``[match_start, match_end)``.

    ``text`` is the parent's text (``start`` is its offset in the document). The room left beside the
    match is split evenly, a side that reaches the parent's edge gives its rest to the other side,
    and both ends move inward to the nearest paragraph break, else sentence end, else line break, else space within
    a fifth of the window, so a window starts and ends on whole paragraphs, sentences, lines or words where it can.
    """
    match_start, match_end = max(start, match_start), min(end, max(match_end, match_start))
    room = max(chars - (match_end - match_start), 0)
    before = min(room // 2, match_start - start)
    after = min(room - before, end - match_end)
    before = min(room - after, match_start - start)
    lo, hi = match_start - before, match_end + after
    slack = max(chars // 5, 1)
    if lo > start:
        lo = start + _start_edge(text, max(lo - start, 0), min(lo - start + slack, match_start - start), lo - start)
    if hi < end:
        hi = start + _end_edge(text, max(hi - start - slack, match_end - start), hi - start, hi - start)
    return lo, hi


def fit_to_budget(chunks: Sequence[RetrievedChunk], *, budget: int, count: TokenCounter) -> list[RetrievedChunk]:
    """Cut the parents among ``chunks`` to windows so their texts share ``budget`` tokens (see module doc).

    Chunks that are not parents stay whole, as do parents at or under the water level. The order
    and everything else about each chunk is kept.
    """
    sizes = [count(c.content) for c in chunks]
    if sum(sizes) <= budget:
        return list(chunks)
    level = water_level(sizes, max(budget, 0))
    out: list[RetrievedChunk] = []
    for chunk, size in zip(chunks, sizes, strict=True):
        if not chunk.is_parent or size <= level:
            out.append(chunk)
            continue
        chars = max(int(len(chunk.content) * level / size), chunk.match_end - chunk.match_start)
        lo, hi = window_span(chunk.start_char, chunk.end_char, chunk.match_start, chunk.match_end, chunk.content, chars)
        content = chunk.content[lo - chunk.start_char : hi - chunk.start_char]
        first = chunk.start_line
        first = None if first is None else first + lines_before(chunk.content, lo - chunk.start_char)
        out.append(
            replace(
                chunk,
                content=content,
                start_char=lo,
                end_char=hi,
                content_hash=hashlib.sha256(content.encode()).hexdigest(),
                start_line=first,
                end_line=None if first is None else span_end_line(first, content),
            )
        )
    return out


#: texts longer than this are counted on their first part and scaled: sizing windows needs only an
#: estimate (the formatter counts exactly), and counting whole sections was most of the parents stage
#: (ray-docs-qa: p50 2.7 -> 1.8 ms at 8,000 -> 2,000 characters, nDCG@10 unchanged)
COUNT_SAMPLE_CHARS = 2000


def fit_parents(
    chunks: list[RetrievedChunk], *, max_tokens: int, encoding: str, show_metadata: bool = False
) -> list[RetrievedChunk]:
    """Cut parents to windows around their matched children so every result fits the token budget."""
    if not any(c.is_parent for c in chunks):
        return chunks  # only parents are cut: with none, nothing to count (~0.5 ms of tokenizing a query)
    enc = get_encoding(encoding)

    def count(text: str) -> int:
        if len(text) <= COUNT_SAMPLE_CHARS:
            return len(enc.encode(text, disallowed_special=()))
        sample = len(enc.encode(text[:COUNT_SAMPLE_CHARS], disallowed_special=()))
        return math.ceil(sample * len(text) / COUNT_SAMPLE_CHARS)

    budget = max_tokens - layout_overhead(chunks, encoding=encoding, show_metadata=show_metadata)
    return fit_to_budget(chunks, budget=budget, count=count)
