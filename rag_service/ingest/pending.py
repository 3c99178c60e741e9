"""A batch's documents between chunking and writing: each one chunked and waiting for vectors, how they are
cut into write transactions of whole documents (``Batch`` in ``batch.py``), and how a written one is counted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag_service.ingest.chunk import ChunkedDocument
from rag_service.ingest.report import IngestReport


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


def count_written(report: IngestReport, doc: PendingDocument, embedded_unwritten: set[str]) -> None:
    """Count the written ``doc`` in ``report``; ``embedded_unwritten``: the texts the run embedded whose first
    written chunk is not counted yet (each one found here is counted as embedded and dropped from it)."""
    if doc.existed:
        report.updated += 1
    else:
        report.added += 1
    report.chunks_written += len(doc.chunked.chunks)
    if not doc.chunked.chunks:  # stored, but nothing of it can be found: the report says so
        report.without_chunks.append(doc.source)
    # each written chunk's vector: embedded by this run (its text's first written copy), else reused (a stored
    # vector, or a copy of a text embedded once), so written = embedded + reused whatever stopped or failed
    for digest in doc.chunk_hashes:
        if digest in embedded_unwritten:
            embedded_unwritten.discard(digest)
            report.chunks_embedded += 1
        else:
            report.embeddings_reused += 1
    report.add_filtered(doc.chunked.filtered)
