"""A LlamaIndex retriever over rag_service (extra ``llamaindex``).

    from rag_service.integrations.llama_index import UniversalRAGRetriever
    from llama_index.core.query_engine import RetrieverQueryEngine

    retriever = UniversalRAGRetriever(context="agent", collection="kb")
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

Each ``NodeWithScore`` holds a ``TextNode`` with the chunk text and the metadata of
``integrations.metadata.chunk_metadata``; its score is the chunk's relevance (0..1). Only source,
title, header path and citation number are shown to the LLM and to embedders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag_service.integrations import check_overrides, require_extra

require_extra("llama_index.core.retrievers", extra="llamaindex", feature="rag_service.integrations.llama_index")

from llama_index.core.callbacks import CallbackManager  # noqa: E402  (after the extra check, for its message)
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from rag_service.integrations.metadata import LLM_METADATA_KEYS, result_metadata  # noqa: E402
from rag_service.result import RAGResult  # noqa: E402
from rag_service.service import UniversalRAGService, get_universal_rag  # noqa: E402

__all__ = ["UniversalRAGRetriever", "to_nodes"]


class UniversalRAGRetriever(BaseRetriever):
    """``retrieve()`` as a LlamaIndex ``BaseRetriever`` (``retrieve``, ``aretrieve``, query engines).

    ``context`` is the preset (a row of ``rag_configurations``), ``collection`` and ``filters`` select
    the chunks, ``overrides`` are per-call preset overrides (``max_chunks``, ``rerank_enabled``, ...).
    ``service`` defaults to the process-wide ``get_universal_rag()``.
    """

    def __init__(
        self,
        service: UniversalRAGService | None = None,
        *,
        context: str = "chatbot",
        collection: str = "default",
        filters: Mapping[str, Any] | None = None,
        overrides: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.service = service
        self.context = context
        self.collection = collection
        self.filters = dict(filters) if filters is not None else None
        self.overrides = check_overrides(type(self).__name__, overrides or {})

    def _service(self) -> UniversalRAGService:
        return self.service if self.service is not None else get_universal_rag()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        overrides = check_overrides(type(self).__name__, self.overrides)  # the dict may have changed since
        result = self._service().retrieve(
            query_bundle.query_str, self.context, collection=self.collection, filters=self.filters, **overrides
        )
        return to_nodes(result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        overrides = check_overrides(type(self).__name__, self.overrides)
        result = await self._service().aretrieve(
            query_bundle.query_str, self.context, collection=self.collection, filters=self.filters, **overrides
        )
        return to_nodes(result)


def to_nodes(result: RAGResult) -> list[NodeWithScore]:
    """The chunks of ``result`` as scored LlamaIndex nodes, most relevant first."""
    nodes = []
    for chunk, metadata in result_metadata(result):
        hidden = [key for key in metadata if key not in LLM_METADATA_KEYS]
        node = TextNode(
            id_=str(chunk.chunk_id),
            text=chunk.content,
            metadata=metadata,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
        )
        nodes.append(NodeWithScore(node=node, score=float(chunk.relevance_score)))
    return nodes
