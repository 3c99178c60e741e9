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

import copy
from collections.abc import Mapping
from typing import Any

from rag_service.errors import ConfigurationError
from rag_service.integrations import check_overrides, check_picklable, require_extra, share_service

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
        if service is not None and not isinstance(service, UniversalRAGService):
            raise ConfigurationError(
                f"service must be a UniversalRAGService (get_universal_rag()), not {type(service).__name__}"
            )
        if not isinstance(context, str):
            raise ConfigurationError(f"context must be a name (text), not {type(context).__name__}")
        # a bad name, filter or knob fails here, at start-up, not at the first query
        self.filters = UniversalRAGService.check_call_options(collection=collection, filters=filters)
        self.collection = collection
        self.overrides = check_overrides(type(self).__name__, {} if overrides is None else overrides)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.service = service
        self.context = context

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without a service only (``integrations.check_picklable``)."""
        check_picklable(self)
        return self.__dict__.copy()

    def __copy__(self) -> UniversalRAGRetriever:
        """A shallow copy, with the same service (pickling, which ``copy`` would use, refuses one)."""
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo: dict[int, Any]) -> UniversalRAGRetriever:
        """A deep copy shares the service: its connections and models are not copied."""
        share_service(self, memo)
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return copied

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
