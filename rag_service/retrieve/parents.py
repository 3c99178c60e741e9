"""Parent expansion and de-duplication of retrieved chunks."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from rag_service.lines import lines_before, span_end_line
from rag_service.result import RetrievedChunk


def dedupe(chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """Drop repeated chunk ids and identical texts, keeping the first (best) of each."""
    seen_ids: set[int] = set()
    seen_texts: set[str] = set()
    kept: list[RetrievedChunk] = []
    for chunk in chunks:
        key = hashlib.sha256(chunk.content.encode()).hexdigest()  # content_hash covers the embedded prefix too
        if chunk.chunk_id in seen_ids or key in seen_texts:
            continue
        seen_ids.add(chunk.chunk_id)
        seen_texts.add(key)
        kept.append(chunk)
    return kept


#: weight of a section's other matching children in its score (0: the best child alone; 1: noisy-OR).
#: On ray-docs-qa (workflow, max_chunks 10) 0 / 0.3 / 0.6 / 0.8 / 1.0 gave 0.314 / 0.322 / 0.329 / 0.335 /
#: 0.341 nDCG@10 (docs/benchmarks.md); SciFact never groups children, so it cannot move there.
SIBLING_WEIGHT = 1.0


def expand_to_parents(
    chunks: Sequence[RetrievedChunk], parents: dict[int, tuple[str, int, int]], *, sibling_weight: float | None = None
) -> list[RetrievedChunk]:
    """Replace children by their sections, each section once, ranked by the score of all its children.

    ``parents`` maps a chunk id to ``(parent_content, parent_start, parent_end)``; chunks without a
    parent stay as they are. A section keeps its best child's scores (but its children's best proximity), span
    of the match (``match_start``/``match_end``) and takes the section's offsets; its relevance is
    ``1 - (1 - r1) * prod(1 - w * ri)`` over its children's relevances (best ``r1`` first, ``w`` the
    sibling weight), so a section where several children matched ranks above one where one did. Where an LLM rated
    the children (``scores.llm``), a section is its best child, in the LLM's order: summed, a section of many
    children rated 1/10 ranked above the one rated 10/10.
    """
    rated = any(c.scores.llm is not None for c in chunks)
    weight = (0.0 if rated else SIBLING_WEIGHT) if sibling_weight is None else sibling_weight
    out: list[RetrievedChunk] = []
    index: dict[tuple[int, int, int], int] = {}
    miss: list[float] = []  # per output entry: product of (1 - weighted relevance) of its children
    for chunk in chunks:
        parent = parents.get(chunk.chunk_id)
        if parent is None:
            out.append(chunk)
            miss.append(1.0 - chunk.relevance_score)
            continue
        content, start, end = parent
        key = (chunk.document_id, start, end)
        if key in index:
            miss[index[key]] *= 1.0 - weight * chunk.relevance_score
            out[index[key]] = _nearest(out[index[key]], chunk)
            continue
        index[key] = len(out)
        miss.append(1.0 - chunk.relevance_score)
        out.append(
            replace(
                chunk,
                content=content,
                start_char=start,
                end_char=end,
                content_hash=hashlib.sha256(content.encode()).hexdigest(),
                is_parent=True,
                chunk_type="parent",
                start_line=(first := _section_start_line(chunk, content, start)),
                end_line=None if first is None else span_end_line(first, content),
            )
        )
    if weight > 0:
        out = [replace(c, relevance_score=min(max(1.0 - m, 0.0), 1.0)) for c, m in zip(out, miss, strict=True)]
        out = [out[i] for i in sorted(range(len(out)), key=lambda i: (-out[i].relevance_score, i))]
    return dedupe(out)


def _section_start_line(child: RetrievedChunk, content: str, start: int) -> int | None:
    """The first line of the section ``content`` (at ``start``) from its child's: counted in the text at hand."""
    if child.start_line is None or not start <= child.start_char <= start + len(content):
        return None
    return child.start_line - lines_before(content, child.start_char - start)


def _nearest(section: RetrievedChunk, child: RetrievedChunk) -> RetrievedChunk:
    """``section`` with ``child``'s term proximity when it is higher (a section's is its best child's)."""
    own, other = section.scores.proximity, child.scores.proximity
    if other is None or (own is not None and own >= other):
        return section
    return replace(section, scores=replace(section.scores, proximity=other))


def parent_map(chunks: Sequence[RetrievedChunk]) -> dict[int, tuple[str, int, int]]:
    """Each chunk's ``parent`` (its section's content and span) by chunk id, for those with one."""
    return {c.chunk_id: c.parent for c in chunks if c.parent is not None}
