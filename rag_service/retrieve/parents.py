"""Parent expansion and de-duplication of retrieved chunks."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

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


def expand_to_parents(
    chunks: Sequence[RetrievedChunk], parents: dict[int, tuple[str, int, int]]
) -> list[RetrievedChunk]:
    """Replace children by their sections, each section once, in the order of its best child.

    ``parents`` maps a chunk id to ``(parent_content, parent_start, parent_end)``; chunks without a
    parent stay as they are. The section keeps its best child's scores and takes the section's offsets.
    """
    out: list[RetrievedChunk] = []
    seen: set[tuple[int, int, int]] = set()
    for chunk in chunks:
        parent = parents.get(chunk.chunk_id)
        if parent is None:
            out.append(chunk)
            continue
        content, start, end = parent
        key = (chunk.document_id, start, end)
        if key in seen:
            continue
        seen.add(key)
        out.append(
            replace(
                chunk,
                content=content,
                start_char=start,
                end_char=end,
                content_hash=hashlib.sha256(content.encode()).hexdigest(),
                is_parent=True,
                chunk_type="parent",
            )
        )
    return dedupe(out)
