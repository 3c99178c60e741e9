"""A stage that did not run is visible through the LangChain and LlamaIndex retrievers (issue 23.7f)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore

from rag_service.embed import HashingEmbedder
from rag_service.integrations.langchain import UniversalRAGRetriever as LangChainRetriever
from rag_service.integrations.llama_index import UniversalRAGRetriever as LlamaIndexRetriever
from rag_service.integrations.metadata import RetrievalDegradedWarning
from rag_service.service import UniversalRAGService
from tests.integration.knowledge import kb_service


@pytest.fixture
def degraded(db, settings, tmp_path, monkeypatch) -> UniversalRAGService:
    """The kb collection behind a service whose reranker cannot load: retrieval goes on without it."""
    kb_service(db, settings, tmp_path, monkeypatch)
    missing = dataclasses.replace(settings, rerank_model=str(tmp_path / "no-such-cross-encoder"))
    return UniversalRAGService(missing, database=db, embedder=HashingEmbedder())


def test_langchain_documents_carry_degraded_and_a_warning_is_raised(degraded, tmp_path):
    retriever = LangChainRetriever(service=degraded, context="search", collection="kb")
    with pytest.warns(RetrievalDegradedWarning, match="rag_service retrieval degraded: rerank: ") as caught:
        docs = retriever.invoke("how long are backups kept?")
    assert docs and all(isinstance(d, Document) for d in docs)
    assert str(tmp_path / "no-such-cross-encoder") in str(caught[0].message)
    for doc in docs:
        assert len(doc.metadata["degraded"]) == 1 and doc.metadata["degraded"][0].startswith("rerank: ")


def test_llama_index_nodes_carry_degraded_and_a_warning_is_raised(degraded):
    retriever = LlamaIndexRetriever(service=degraded, context="search", collection="kb")
    with pytest.warns(RetrievalDegradedWarning, match="rerank: "):
        nodes = retriever.retrieve("how long are backups kept?")
    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    assert all(n.node.metadata["degraded"][0].startswith("rerank: ") for n in nodes)
    assert "degraded" in nodes[0].node.excluded_llm_metadata_keys  # for code, not shown to the LLM


def test_a_call_where_every_stage_ran_warns_nothing(db, settings, tmp_path, monkeypatch):
    service = kb_service(db, settings, tmp_path, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetrievalDegradedWarning)
        docs = LangChainRetriever(service=service, context="search", collection="kb").invoke("backups")
    assert docs and all(d.metadata["degraded"] == [] for d in docs)
