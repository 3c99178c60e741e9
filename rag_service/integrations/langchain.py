"""A LangChain retriever over rag_service (extra ``langchain``).

    from rag_service.integrations.langchain import UniversalRAGRetriever

    retriever = UniversalRAGRetriever(context="agent", collection="kb", overrides={"max_chunks": 4})
    docs = retriever.invoke("How do backups work?")          # list[Document], most relevant first
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm

Each ``Document`` carries the chunk text and the metadata of ``integrations.metadata.chunk_metadata``
(source, headers, offsets, matched span, relevance, scores, chunk type, citation number).
"""

from __future__ import annotations

from typing import Any

from rag_service.integrations import check_overrides, require_extra

require_extra("langchain_core.retrievers", extra="langchain", feature="rag_service.integrations.langchain")

from langchain_core.callbacks import (  # noqa: E402  (after the extra check, for its message)
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import Field, model_validator  # noqa: E402

from rag_service.integrations.metadata import result_metadata  # noqa: E402
from rag_service.result import RAGResult  # noqa: E402
from rag_service.service import UniversalRAGService, get_universal_rag  # noqa: E402

__all__ = ["UniversalRAGRetriever", "to_documents"]


class UniversalRAGRetriever(BaseRetriever):
    """``retrieve()`` as a LangChain ``BaseRetriever``: ``invoke``, ``ainvoke``, ``batch``, LCEL.

    ``context`` is the preset (a row of ``rag_configurations``), ``collection`` and ``filters`` select
    the chunks, ``overrides`` are per-call preset overrides (``max_chunks``, ``rerank_enabled``, ...).
    ``service`` defaults to the process-wide ``get_universal_rag()``.
    """

    service: UniversalRAGService | None = None
    context: str = "chatbot"
    collection: str = "default"
    filters: dict[str, Any] | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        """LangChain's models ignore unknown fields: ``max_chunks=2`` was dropped and 12 documents came back."""
        unknown = sorted(set(data) - set(cls.model_fields)) if isinstance(data, dict) else []
        if unknown:
            raise ValueError(
                f"UniversalRAGRetriever has no field {unknown[0]!r}; preset knobs go in overrides, e.g. "
                f"overrides={{{unknown[0]!r}: ...}}; the fields are {', '.join(cls.model_fields)}"
            )
        if isinstance(data, dict) and isinstance(data.get("overrides"), dict):
            check_overrides(cls.__name__, data["overrides"])  # collection=, filters=: before the first call
        return data

    def _service(self) -> UniversalRAGService:
        return self.service if self.service is not None else get_universal_rag()

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        overrides = check_overrides(type(self).__name__, self.overrides)  # the dict may have changed since
        result = self._service().retrieve(
            query, self.context, collection=self.collection, filters=self.filters, **overrides
        )
        return to_documents(result)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        overrides = check_overrides(type(self).__name__, self.overrides)
        result = await self._service().aretrieve(
            query, self.context, collection=self.collection, filters=self.filters, **overrides
        )
        return to_documents(result)


def to_documents(result: RAGResult) -> list[Document]:
    """The chunks of ``result`` as LangChain documents, most relevant first."""
    return [
        Document(page_content=chunk.content, metadata=metadata, id=str(chunk.chunk_id))
        for chunk, metadata in result_metadata(result)
    ]
