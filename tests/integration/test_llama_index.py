"""The LlamaIndex retriever on the real database: nodes with scores and metadata, in a RetrieverQueryEngine."""

from __future__ import annotations

import asyncio
import copy
import pickle

import numpy as np
import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from sqlalchemy import text

from rag_service.errors import ConfigurationError
from rag_service.integrations.llama_index import UniversalRAGRetriever
from rag_service.service import UniversalRAGService
from tests.integration.knowledge import kb_service


@pytest.fixture
def service(db, settings, tmp_path, monkeypatch) -> UniversalRAGService:
    return kb_service(db, settings, tmp_path, monkeypatch)


def test_retrieve_returns_scored_nodes_with_their_metadata(service, connection):
    retriever = UniversalRAGRetriever(service, context="agent", collection="kb", overrides={"max_chunks": 2})
    assert isinstance(retriever, BaseRetriever)
    results = retriever.retrieve("how long are nightly backups kept?")
    assert 1 <= len(results) <= 2 and all(isinstance(r, NodeWithScore) for r in results)
    top = results[0]
    assert isinstance(top.node, TextNode)
    meta = top.node.metadata
    assert meta["source"] == "kb/ops.md" and meta["headers"] == {"h1": "Operations", "h2": "Backups"}
    assert meta["chunk_type"] == "parent" and meta["citation"] == 1
    stored = connection.execute(text("SELECT content FROM documents WHERE source = 'kb/ops.md'")).scalar_one()
    assert stored[meta["start_char"] : meta["end_char"]] == top.node.get_content()
    assert meta["start_char"] <= meta["match_start"] < meta["match_end"] <= meta["end_char"]
    assert top.score == meta["relevance_score"] and 0.0 < top.score <= 1.0
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    # the LLM sees the text with its source and section, not ids, offsets and scores
    shown = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "source: kb/ops.md" in shown and "header_path: Operations > Backups" in shown
    assert "start_char" not in shown and "scores" not in shown


def test_overrides_naming_its_own_arguments_are_one_line(service):
    with pytest.raises(ConfigurationError) as raised:
        UniversalRAGRetriever(service, collection="kb", overrides={"filters": {"source": "kb/ops.md"}})
    assert str(raised.value) == (
        "overrides['filters'] is not a preset override; pass it as UniversalRAGRetriever(filters=...) instead"
    )
    retriever = UniversalRAGRetriever(service, collection="kb")
    retriever.overrides["query"] = "x"
    with pytest.raises(ConfigurationError, match=r"overrides\['query'\] .* pass it as the query text instead"):
        retriever.retrieve("backups")


def test_async_retrieve_matches(service):
    retriever = UniversalRAGRetriever(service, context="search", collection="kb", filters={"source": "kb/search.md"})
    expected = retriever.retrieve("reranking candidates")
    got = asyncio.run(retriever.aretrieve("reranking candidates"))
    assert got and [(r.node.node_id, r.score) for r in got] == [(r.node.node_id, r.score) for r in expected]
    assert {r.node.metadata["source"] for r in got} == {"kb/search.md"}


def test_a_query_engine_answers_from_the_retrieved_nodes(service):
    retriever = UniversalRAGRetriever(service, context="agent", collection="kb", overrides={"max_chunks": 1})
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())  # MockLLM answers with its prompt

    response = engine.query("How long is a nightly backup kept?")

    assert [n.node.metadata["source"] for n in response.source_nodes] == ["kb/ops.md"]
    prompt = str(response)
    assert "kept for thirty days" in prompt and "source: kb/ops.md" in prompt
    assert "How long is a nightly backup kept?" in prompt and "Replication" not in prompt


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"filters": "source_prefix=docs/"}, "filters must be a mapping of filter keys to values, e.g. {'source_"),
        ({"overrides": "max_chunks"}, "overrides must be a mapping of preset knobs to values, e.g. {'max_chunks'"),
        ({"overrides": [("max_chunks", 1)]}, "overrides must be a mapping of preset knobs to values"),
        ({"overrides": {"k": 2}}, "unknown override(s) k; did you mean max_chunks? valid ones: "),
        ({"overrides": {"max_chunks": "3"}}, "max_chunks ('3') must be a whole number"),
        ({"filters": {"sourc": "a"}}, "unknown filter key(s) 'sourc'; did you mean 'source'?"),
        ({"collection": 123}, "collection must be a name (text), not int"),
        ({"context": None}, "context must be a name (text), not NoneType"),
    ],
)
def test_construction_errors_are_one_line(arguments, message):
    """D7/D8: a string for filters or overrides gave Python's "dictionary update sequence element #0 has length 1",
    a list of pairs was taken, and unknown or wrong overrides failed only at the first query."""
    arguments = {"collection": "kb", **arguments}
    with pytest.raises(ConfigurationError) as raised:
        UniversalRAGRetriever(**arguments)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_retriever_given_a_service_refuses_pickling_and_copies_share_it(service):
    """D13: pickling failed with "Can't pickle local object 'create_engine.<locals>.connect'"."""
    bound = UniversalRAGRetriever(service, context="search", collection="kb", overrides={"max_chunks": np.int64(1)})
    assert type(bound.overrides["max_chunks"]) is int
    with pytest.raises(ConfigurationError, match=r"^a UniversalRAGRetriever given service= cannot be pickled \("):
        pickle.dumps(bound)
    for copied in (copy.copy(bound), copy.deepcopy(bound)):
        assert copied.service is service and copied.overrides == {"max_chunks": 1}
        assert len(copied.retrieve("backups")) == 1
    unbound = pickle.loads(pickle.dumps(UniversalRAGRetriever(collection="kb", overrides={"max_chunks": 1})))
    assert unbound.service is None and unbound.overrides == {"max_chunks": 1}
