"""Whose a document's metadata is: the caller's ``metadata``, plus what ingestion generates (the summary).

Ingestion and ``rag metadata build`` both store ``document_metadata``; a reindex passes the stored
document's ``user_metadata`` back in, so generated keys are made again, never carried over.
"""

from __future__ import annotations

from typing import Any

from rag_service.ingest.summary import SummaryWriter

#: keys of ``documents.metadata`` that ingestion writes itself; the rest is the caller's ``metadata``
GENERATED_METADATA_KEYS = ("summary", "summary_source")


def user_metadata(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored document's metadata without what ingestion generated (what its caller passed)."""
    return {k: v for k, v in stored.items() if k not in GENERATED_METADATA_KEYS}


def document_metadata(metadata: dict[str, Any], text: str, summaries: SummaryWriter) -> dict[str, Any]:
    """What is stored for a document of ``text``: the caller's ``metadata`` and the generated keys."""
    return {**user_metadata(metadata), **summaries.metadata(text)}
