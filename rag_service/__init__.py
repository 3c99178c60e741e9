"""rag_service: retrieval on PostgreSQL + pgvector that turns documents into context for an LLM."""

from rag_service.errors import RagError

__all__ = ["RagError"]
__version__ = "0.1.0"
