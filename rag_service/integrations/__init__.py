"""Adapters for the frameworks users already build on; each is an optional extra, imported lazily.

- ``rag_service.integrations.langchain``: a LangChain ``BaseRetriever`` (extra ``langchain``)
- ``rag_service.integrations.llama_index``: a LlamaIndex ``BaseRetriever`` (extra ``llamaindex``)
- ``rag_service.integrations.mcp_server``: ``rag mcp``, a Model Context Protocol server (extra ``mcp``)

Importing this package imports no framework; importing an adapter without its extra raises
``MissingExtraError`` naming the ``pip install`` to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from types import ModuleType
from typing import Any

from rag_service.errors import ConfigurationError, MissingExtraError
from rag_service.knobs import call_arguments_in


def require_extra(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise MissingExtraError naming ``pip install 'rag_service[extra]'``."""
    try:
        return import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{feature} needs the {extra!r} extra ({module} is not importable: {exc}); "
            f"run: pip install 'rag_service[{extra}]'"
        ) from exc


def check_overrides(owner: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` as a dict, or ConfigurationError (one line) when one names an argument of ``owner`` itself
    (``collection``, ``filters``, ...), which ``retrieve()`` would get twice."""
    clash = call_arguments_in(overrides)
    if clash:
        name = clash[0]
        where = "the query text" if name == "query" else f"{owner}({name}=...)"
        raise ConfigurationError(
            f"overrides[{name!r}] is not a preset override; pass it as {where} instead"
        )
    return dict(overrides)
