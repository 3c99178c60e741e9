"""The HTTP API (PRD 08 §5) and the search page: ``rag serve``, extra ``rag_service[server]``.

``create_app(service, config)`` builds the ASGI app around one ``UniversalRAGService``; blocking
calls run in a bounded thread pool so the event loop never waits on the database or a model.
"""

from __future__ import annotations

from rag_service.server.app import create_app
from rag_service.server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]
