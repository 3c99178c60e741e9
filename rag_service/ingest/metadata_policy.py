"""Whose a document's metadata is: the caller's ``metadata``, plus what ingestion generates (the summary).

Ingestion and ``rag metadata build`` both store the keys ``SummaryWriter.metadata`` generates beside the caller's;
a reindex passes the stored document's ``user_metadata`` back in, and what is stored for the same text as
``stored``, so a stored LLM summary of unchanged text is kept, not asked again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_service.ingest.summary import RETRY, SummaryWriter

#: keys of ``documents.metadata`` that ingestion writes itself; the rest is the caller's ``metadata``
GENERATED_METADATA_KEYS = ("summary", "summary_source", RETRY)


def user_metadata(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored document's metadata without what ingestion generated (what its caller passed)."""
    return {k: v for k, v in stored.items() if k not in GENERATED_METADATA_KEYS}


def document_metadata(
    metadata: dict[str, Any], text: str, summaries: SummaryWriter, *, stored: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What is stored for a document of ``text``: the caller's ``metadata`` and the generated keys (``stored``: the
    metadata stored for this same text, None when the text is new or changed)."""
    return {**user_metadata(metadata), **summaries.metadata(text, stored=stored)}
