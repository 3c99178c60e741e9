"""Adapters for the frameworks users already build on; each is an optional extra, imported lazily.

- ``rag_service.integrations.langchain``: a LangChain ``BaseRetriever`` (extra ``langchain``)
- ``rag_service.integrations.llama_index``: a LlamaIndex ``BaseRetriever`` (extra ``llamaindex``)
- ``rag_service.integrations.mcp_server``: ``rag mcp``, a Model Context Protocol server (extra ``mcp``)

Importing this package imports no framework; importing an adapter without its extra raises
``MissingExtraError`` naming the ``pip install`` to run.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from rag_service.errors import MissingExtraError


def require_extra(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise MissingExtraError naming ``pip install 'rag_service[extra]'``."""
    try:
        return import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{feature} needs the {extra!r} extra ({module} is not importable: {exc}); "
            f"run: pip install 'rag_service[{extra}]'"
        ) from exc
