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
from rag_service.knobs import call_arguments_in, check_knob_names, check_knobs


def require_extra(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise MissingExtraError naming ``pip install 'rag_service[extra]'``."""
    try:
        return import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{feature} needs the {extra!r} extra ({module} is not importable: {exc}); "
            f"run: pip install 'rag_service[{extra}]'"
        ) from exc


def check_overrides(owner: str, overrides: object) -> dict[str, Any]:
    """``overrides`` as a dict of the knobs' plain values (``knobs.check_knobs``), or ConfigurationError (one line):
    not a mapping, a name of ``owner``'s own arguments (``collection``, ``filters``, which ``retrieve()`` would get
    twice), an unknown knob (with a did-you-mean) or a bad value. Run at construction and at each call."""
    if not isinstance(overrides, Mapping):
        raise ConfigurationError(
            f"overrides must be a mapping of preset knobs to values, e.g. {{'max_chunks': 4}}, "
            f"not {type(overrides).__name__}"
        )
    clash = call_arguments_in(overrides)
    if clash:
        name = clash[0]
        where = "the query text" if name == "query" else f"{owner}({name}=...)"
        raise ConfigurationError(
            f"overrides[{name!r}] is not a preset override; pass it as {where} instead"
        )
    check_knob_names(overrides)
    return check_knobs(overrides)


def check_picklable(owner: object) -> None:
    """ConfigurationError when ``owner`` (a retriever) is bound to a service: its connections, pools and models
    belong to this process, and the process-wide service of another one is built from that one's environment."""
    if getattr(owner, "service", None) is not None:
        name = type(owner).__name__
        raise ConfigurationError(
            f"a {name} given service= cannot be pickled (the service holds this process's database connections "
            f"and models); leave service unset, and the unpickled {name} uses get_universal_rag() of its process"
        )


def share_service(owner: object, memo: dict[int, Any]) -> None:
    """Make ``copy.deepcopy(owner, memo)`` keep ``owner.service`` as it is: a copy shares the process's service."""
    service = getattr(owner, "service", None)
    if service is not None:
        memo[id(service)] = service
