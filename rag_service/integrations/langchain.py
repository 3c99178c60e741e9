"""A LangChain retriever over rag_service (extra ``langchain``).

    from rag_service.integrations.langchain import UniversalRAGRetriever

    retriever = UniversalRAGRetriever(context="agent", collection="kb", overrides={"max_chunks": 4})
    docs = retriever.invoke("How do backups work?")          # list[Document], most relevant first
    docs = retriever.invoke("How do backups work?", k=2)     # per-call knobs over overrides (k, top_k: max_chunks)
    docs = retriever.invoke("How do backups work?", collection="ops", filters={"source_prefix": "runbooks/"})
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm

Each ``Document`` carries the chunk text and the metadata of ``integrations.metadata.chunk_metadata``
(source, headers, offsets, matched span, relevance, scores, chunk type, citation number).
"""

from __future__ import annotations

from typing import Any

from rag_service.errors import ConfigurationError, closest_name
from rag_service.integrations import (
    check_overrides,
    check_picklable,
    require_extra,
    share_service,
)
from rag_service.knobs import COUNT_ALIASES, PRESET_KNOBS

require_extra("langchain_core.retrievers", extra="langchain", feature="rag_service.integrations.langchain")

from langchain_core.callbacks import (  # noqa: E402  (after the extra check, for its message)
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import Field, ValidationError, model_validator  # noqa: E402

from rag_service.integrations.metadata import result_metadata  # noqa: E402
from rag_service.result import RAGResult  # noqa: E402
from rag_service.service import UniversalRAGService, get_universal_rag  # noqa: E402

__all__ = ["UniversalRAGRetriever", "to_documents"]


class UniversalRAGRetriever(BaseRetriever):
    """``retrieve()`` as a LangChain ``BaseRetriever``: ``invoke``, ``ainvoke``, ``batch``, LCEL.

    ``context`` is the preset (a row of ``rag_configurations``), ``collection`` and ``filters`` select
    the chunks, ``overrides`` are per-call preset overrides (``max_chunks``, ``rerank_enabled``, ...), and
    ``invoke(query, k=2)``'s keyword arguments override them for that call (``k``, ``top_k``: ``max_chunks``;
    ``context``, ``collection`` and ``filters`` replace the retriever's own).
    ``service`` defaults to the process-wide ``get_universal_rag()``.
    """

    service: UniversalRAGService | None = None
    context: str = "chatbot"
    collection: str = "default"
    filters: dict[str, Any] | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        # checked before pydantic's validation: an error raised inside it comes wrapped in a ValidationError
        # of 3-4 lines ("1 validation error for ...", "[type=value_error, ...]", a URL)
        try:
            super().__init__(**_checked(type(self), data))
        except ValidationError as exc:  # a field of BaseRetriever (tags=, metadata=): its first error, one line
            raise ConfigurationError(_one_line(type(self).__name__, exc)) from None

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        """``model_validate`` skips ``__init__``: the same checks (LangChain's models ignore unknown fields)."""
        return _checked(cls, data) if isinstance(data, dict) else data

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled without a service only (``integrations.check_picklable``)."""
        check_picklable(self)
        return super().__getstate__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> UniversalRAGRetriever:
        """A deep copy shares the service: its connections and models are not copied."""
        memo = {} if memo is None else memo
        share_service(self, memo)
        return super().__deepcopy__(memo)

    def _service(self) -> UniversalRAGService:
        return self.service if self.service is not None else get_universal_rag()

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = self._call(kwargs)
        return to_documents(self._service().retrieve(query, call.pop("context"), **call))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = self._call(kwargs)
        return to_documents(await self._service().aretrieve(query, call.pop("context"), **call))

    def _call(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``retrieve()``'s arguments for one call: the fields, with ``invoke(query, ...)``'s keyword arguments over
        them (``BaseRetriever`` passes them on, as ``VectorStoreRetriever`` takes them over its ``search_kwargs``).
        ``context``, ``collection`` and ``filters`` replace the fields' for the call; any other name is a knob over
        ``overrides`` (``k`` / ``top_k`` are ``max_chunks``); each is checked as at construction, in one line."""
        owner = type(self).__name__
        overrides = check_overrides(owner, self.overrides)  # the dict may have changed since
        call: dict[str, Any] = {"context": self.context, "collection": self.collection, "filters": self.filters}
        per_call: dict[str, Any] = {}
        typed: dict[str, str] = {}
        for name, value in kwargs.items():
            if name in _LANGCHAIN_KWARGS:
                continue
            if name in call:
                call[name] = value
                continue
            knob = COUNT_ALIASES.get(name, name)
            if knob in per_call:
                raise ConfigurationError(f"invoke({typed[knob]}=..., {name}=...) gives {knob} twice; pass one")
            per_call[knob], typed[knob] = value, name
        try:
            if not isinstance(context := call["context"], str):
                raise ConfigurationError(f"context must be a preset's name (text), not {type(context).__name__}")
            call["filters"] = UniversalRAGService.check_call_options(
                collection=call["collection"], filters=call["filters"]
            )
            return {**call, **overrides, **check_overrides(owner, per_call)}
        except ConfigurationError as exc:
            raise ConfigurationError(f"invoke(): {exc}") from None


#: keyword arguments of ``invoke`` that LangChain reads itself and passes on too
_LANGCHAIN_KWARGS = frozenset({"verbose"})


def _checked(cls: type[UniversalRAGRetriever], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``filters`` and ``overrides`` as dicts, or ConfigurationError (one line) for an unknown
    field or a value of the wrong kind; a knob given as a field is pointed to ``overrides``."""
    unknown = sorted(set(data) - set(cls.model_fields), key=str)
    if unknown:
        raise ConfigurationError(_unknown_field(cls, str(unknown[0])))
    checked = dict(data)
    for name in ("context", "collection"):
        if name in data and not isinstance(data[name], str):
            raise ConfigurationError(f"{name} must be a name (text), not {type(data[name]).__name__}")
    service = data.get("service")
    if service is not None and not isinstance(service, UniversalRAGService):
        raise ConfigurationError(
            f"service must be a UniversalRAGService (get_universal_rag()), not {type(service).__name__}"
        )
    filters = UniversalRAGService.check_call_options(
        collection=data.get("collection", "default"), filters=data.get("filters")
    )
    if "filters" in data:
        checked["filters"] = filters
    if "overrides" in data:
        checked["overrides"] = check_overrides(cls.__name__, data["overrides"])
    return checked


def _unknown_field(cls: type[UniversalRAGRetriever], name: str) -> str:
    """The one line for a field ``cls`` lacks: ``overrides=`` only for a real knob, else the closest name."""
    fields = list(cls.model_fields)
    start = f"{cls.__name__} has no field {name!r}"
    if name in PRESET_KNOBS:
        return f"{start}; preset knobs go in overrides, e.g. overrides={{{name!r}: ...}}"
    knob = COUNT_ALIASES.get(name) or closest_name(name, PRESET_KNOBS)
    if knob is not None:
        return f"{start}; did you mean the preset knob {knob}? pass overrides={{{knob!r}: ...}}"
    near = closest_name(name, fields)
    hint = f"did you mean {near}=...? " if near is not None else ""
    return f"{start}; {hint}the fields are {', '.join(fields)}; preset knobs go in overrides={{...}}"


def _one_line(owner: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(map(str, error["loc"])) or "arguments"
    return f"{owner}({where}=...): {error['msg']}, not {error.get('input')!r:.60}"


def to_documents(result: RAGResult) -> list[Document]:
    """The chunks of ``result`` as LangChain documents, most relevant first."""
    return [
        Document(page_content=chunk.content, metadata=metadata, id=str(chunk.chunk_id))
        for chunk, metadata in result_metadata(result)
    ]
