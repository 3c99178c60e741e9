"""rag_service: retrieval on PostgreSQL + pgvector that turns documents into context for an LLM.

The public names are imported lazily, so ``import rag_service.errors`` (or the CLI's ``--help``)
does not pay for torch and sentence-transformers.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_service.db.health import DatabaseHealth as DatabaseHealth
    from rag_service.errors import RagError as RagError
    from rag_service.ingest.report import IngestReport as IngestReport
    from rag_service.ingest.strategies import list_strategies as list_strategies
    from rag_service.ingest.strategies import recommend_strategy as recommend_strategy
    from rag_service.result import RAGResult as RAGResult
    from rag_service.result import RetrievalMetrics as RetrievalMetrics
    from rag_service.result import RetrievedChunk as RetrievedChunk
    from rag_service.result import Source as Source
    from rag_service.service import UniversalRAGService as UniversalRAGService
    from rag_service.service import get_universal_rag as get_universal_rag
    from rag_service.service import reset_universal_rag as reset_universal_rag
    from rag_service.service_documents import DocumentBatch as DocumentBatch
    from rag_service.service_documents import NewDocument as NewDocument

_EXPORTS = {
    "DatabaseHealth": "rag_service.db.health",
    "DocumentBatch": "rag_service.service_documents",
    "IngestReport": "rag_service.ingest.report",
    "NewDocument": "rag_service.service_documents",
    "RAGResult": "rag_service.result",
    "RagError": "rag_service.errors",
    "RetrievalMetrics": "rag_service.result",
    "RetrievedChunk": "rag_service.result",
    "Source": "rag_service.result",
    "UniversalRAGService": "rag_service.service",
    "get_universal_rag": "rag_service.service",
    "list_strategies": "rag_service.ingest.strategies",
    "recommend_strategy": "rag_service.ingest.strategies",
    "reset_universal_rag": "rag_service.service",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rag_service' has no attribute {name!r}")
