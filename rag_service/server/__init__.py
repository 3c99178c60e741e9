"""The HTTP API (PRD 08 §5) and the search page: ``rag serve``, extra ``rag_service[server]``.

``create_app(service, config)`` builds the ASGI app around one ``UniversalRAGService``; blocking
calls run in a bounded thread pool so the event loop never waits on the database or a model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_service.server.app import create_app
    from rag_service.server.config import ServerConfig

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    # lazy: the CLI imports ``rag_service.server.command`` for every command, and FastAPI costs ~0.5 s
    if name == "create_app":
        from rag_service.server.app import create_app

        return create_app
    if name == "ServerConfig":
        from rag_service.server.config import ServerConfig

        return ServerConfig
    raise AttributeError(f"module 'rag_service.server' has no attribute {name!r}")
