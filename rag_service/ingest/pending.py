"""A batch's documents between chunking and writing: each one chunked and waiting for vectors, and how they are
cut into write transactions of whole documents (``Batch`` in ``batch.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag_service.ingest.chunk import ChunkedDocument


@dataclass(slots=True)
class PendingDocument:
    """A document chunked and waiting for vectors."""

    source: str
    title: str
    text: str
    content_hash: str
    chunker: str
    chunked: ChunkedDocument
    existed: bool
    metadata: dict[str, Any]
    chunk_hashes: list[str]  # content_hash of each chunk's embedded text, in chunk order
    embed_texts: list[str]  # what the model encodes for each chunk: its search prefix and its text
    edges: int = 0  # chunk-graph edges written with it
    graph_seconds: float = 0.0


def write_groups(pending: list[PendingDocument], chunks: int) -> list[list[PendingDocument]]:
    """``pending`` in order, cut into runs of whole documents of at most ``chunks`` chunks (a larger one alone)."""
    groups: list[list[PendingDocument]] = []
    size = 0
    for doc in pending:
        count = len(doc.chunked.chunks)
        if not groups or size + count > chunks:
            groups.append([])
            size = 0
        groups[-1].append(doc)
        size += count
    return groups
