"""The LangChain retriever on the real database: invoke, ainvoke, metadata, and inside an LCEL chain."""

from __future__ import annotations

import asyncio
import copy
import pickle
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from sqlalchemy import text

from rag_service.errors import ConfigurationError, UnknownCollectionError, UnknownContextError
from rag_service.integrations.langchain import UniversalRAGRetriever
from rag_service.service import UniversalRAGService
from tests.integration.knowledge import kb_service


@pytest.fixture
def service(db, settings, tmp_path, monkeypatch) -> UniversalRAGService:
    return kb_service(db, settings, tmp_path, monkeypatch)


def test_invoke_returns_documents_with_their_metadata(service, connection):
    retriever = UniversalRAGRetriever(service=service, context="agent", collection="kb", overrides={"max_chunks": 2})
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("how long are nightly backups kept?")
    assert 1 <= len(docs) <= 2 and all(isinstance(d, Document) for d in docs)
    top = docs[0]
    meta = top.metadata
    assert meta["source"] == "kb/ops.md" and meta["collection"] == "kb"
    assert meta["headers"] == {"h1": "Operations", "h2": "Backups"} and meta["header_path"] == "Operations > Backups"
    assert meta["chunk_type"] == "parent" and meta["is_parent"] is True  # the agent preset returns sections
    stored = connection.execute(text("SELECT content FROM documents WHERE source = 'kb/ops.md'")).scalar_one()
    assert stored[meta["start_char"] : meta["end_char"]] == top.page_content
    assert meta["start_char"] <= meta["match_start"] < meta["match_end"] <= meta["end_char"]
    assert 0.0 < meta["relevance_score"] <= 1.0 and "fused" in meta["scores"]
    assert meta["citation"] == 1 and top.id == str(meta["chunk_id"])
    scores = [d.metadata["relevance_score"] for d in docs]
    assert scores == sorted(scores, reverse=True)


def test_fields_reach_retrieve(service):
    only_search = UniversalRAGRetriever(
        service=service, context="search", collection="kb", filters={"source": "kb/search.md"}
    )
    docs = only_search.invoke("backups and reranking")
    assert docs and {d.metadata["source"] for d in docs} == {"kb/search.md"}
    assert all(d.metadata["chunk_type"] == "child" for d in docs)  # the search preset keeps children
    assert all(d.metadata["keywords"] and d.metadata["summary"] for d in docs)  # issue 17's metadata
    with pytest.raises(UnknownCollectionError, match="collection 'empty' does not exist"):
        UniversalRAGRetriever(service=service, collection="empty").invoke("backups")
    with pytest.raises(UnknownContextError, match="unknown context 'nope'"):
        UniversalRAGRetriever(service=service, context="nope", collection="kb").invoke("backups")
    with pytest.raises(ValueError, match="has no field 'max_chunks'; preset knobs go in overrides"):
        UniversalRAGRetriever(service=service, collection="kb", max_chunks=2)  # was dropped: 12 documents came back
    capped = UniversalRAGRetriever(service=service, collection="kb", overrides={"max_chunks": 1}, tags=["t"])
    assert len(capped.invoke("backups and reranking")) == 1


def test_overrides_naming_its_own_fields_are_one_line(service):
    with pytest.raises(ValueError, match=r"overrides\['filters'\] is not a preset override; pass it as "):
        UniversalRAGRetriever(service=service, collection="kb", overrides={"filters": {"source": "kb/ops.md"}})
    retriever = UniversalRAGRetriever(service=service, context="agent", collection="kb")
    retriever.overrides["collection"] = "alpha"  # changed after construction: refused at the call, not a TypeError
    with pytest.raises(ConfigurationError) as raised:
        retriever.invoke("x")
    assert str(raised.value) == (
        "overrides['collection'] is not a preset override; pass it as UniversalRAGRetriever(collection=...) instead"
    )
    with pytest.raises(ConfigurationError, match=r"overrides\['collection'\]"):
        asyncio.run(retriever.ainvoke("x"))


def test_invoke_keyword_arguments_are_per_call_overrides(service):
    """BaseRetriever.invoke(input, config, **kwargs) passes kwargs on only to a _get_relevant_documents that takes
    them; ours took none, so invoke(q, k=2) or a misspelt knob came back as invoke(q) did (audit 53b 5)."""
    retriever = UniversalRAGRetriever(service=service, context="search", collection="kb", overrides={"max_chunks": 3})
    query = "backups and reranking"
    assert len(retriever.invoke(query)) == 3
    for kwargs in ({"k": 1}, {"top_k": 1}, {"max_chunks": 1}, {"max_chunks": 1, "verbose": False}):
        assert len(retriever.invoke(query, **kwargs)) == 1, kwargs
        assert len(asyncio.run(retriever.ainvoke(query, **kwargs))) == 1, kwargs
    one_at_a_time = {"max_concurrency": 1}  # the test's session is one connection
    assert [len(docs) for docs in retriever.batch([query, query], one_at_a_time, k=2)] == [2, 2]
    assert len(retriever.bind(k=1).invoke(query)) == 1
    assert retriever.overrides == {"max_chunks": 3}  # a call's knobs do not stay
    refused = {
        "invoke(): unknown override(s) max_chunkz; did you mean max_chunks? valid ones: ": {"max_chunkz": 2},
        "invoke(): max_chunks (0) must be between 1 and 1000": {"k": 0},
        "invoke(): rerank_enabled ('no') must be true or false": {"rerank_enabled": "no"},
        "invoke(k=..., max_chunks=...) gives max_chunks twice; pass one": {"k": 2, "max_chunks": 3},
        "invoke(): unknown filter key(s) 'sorce'; did you mean 'source'?": {"filters": {"sorce": "kb/ops.md"}},
        "collection 'elsewhere' does not exist; the collections are 'kb'": {"collection": "elsewhere"},
        "invoke(): context must be a preset's name (text), not int": {"context": 3},
    }
    for message, kwargs in refused.items():
        with pytest.raises(ConfigurationError) as raised:
            retriever.invoke(query, **kwargs)
        assert str(raised.value).startswith(message), kwargs


def test_invoke_takes_the_context_collection_and_filters_of_its_call(service):
    """``invoke(q, filters=..., collection=...)`` was refused: a chain choosing where to search per question had to
    build a retriever per choice. They replace the retriever's own for that call, as its knobs do."""
    retriever = UniversalRAGRetriever(service=service, context="search", collection="kb")
    sources = {d.metadata["source"] for d in retriever.invoke("backups and reranking")}
    assert len(sources) == 2
    for only in sources:
        for call in (retriever.invoke, lambda q, **kw: asyncio.run(retriever.ainvoke(q, **kw))):
            docs = call("backups and reranking", filters={"source": only})
            assert docs and {d.metadata["source"] for d in docs} == {only}
    assert retriever.filters is None  # a call's filters do not stay
    empty = UniversalRAGRetriever(service=service, context="search", collection="default")
    assert empty.invoke("backups", collection="kb") == retriever.invoke("backups")
    chatbot = retriever.invoke("backups", context="chatbot", k=1)
    assert len(chatbot) == 1


def test_ainvoke_matches_invoke(service):
    retriever = UniversalRAGRetriever(service=service, context="search", collection="kb")
    expected = retriever.invoke("replica failover")
    got = asyncio.run(retriever.ainvoke("replica failover"))
    assert got == expected and got


class PromptRecorder(BaseCallbackHandler):
    """Keeps the messages each chat model call received."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.prompts.extend(messages)


def test_in_an_lcel_chain_the_model_receives_the_retrieved_context(service):
    retriever = UniversalRAGRetriever(service=service, context="agent", collection="kb", overrides={"max_chunks": 1})

    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(f"[{d.metadata['citation']}] {d.metadata['source']}\n{d.page_content}" for d in docs)

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from this context only:\n{context}"), ("human", "{question}")]
    )
    model = FakeListChatModel(responses=["Thirty days [1]."])
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()
    recorder = PromptRecorder()

    answer = chain.invoke("How long is a nightly backup kept?", config={"callbacks": [recorder]})

    assert answer == "Thirty days [1]."
    [messages] = recorder.prompts
    system, human = messages
    assert human.content == "How long is a nightly backup kept?"
    assert system.content.startswith("Answer from this context only:\n[1] kb/ops.md\n## Backups\n")
    assert "kept for thirty days" in system.content and "Replication" not in system.content


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"k": 2}, "has no field 'k'; did you mean the preset knob max_chunks? pass overrides={'max_chunks': ...}"),
        ({"max_chunks": 2}, "has no field 'max_chunks'; preset knobs go in overrides, e.g. overrides={'max_chunks'"),
        ({"colection": "kb"}, "has no field 'colection'; did you mean collection=...? the fields are name, tags"),
        ({"collection": 123}, "collection must be a name (text), not int"),
        ({"context": None}, "context must be a name (text), not NoneType"),
        ({"service": "rag"}, "service must be a UniversalRAGService (get_universal_rag()), not str"),
        ({"filters": "x"}, "filters must be a mapping of filter keys to values, e.g. {'source_prefix': 'docs/'}"),
        ({"filters": {"sourc": "a"}}, "unknown filter key(s) 'sourc'; did you mean 'source'?"),
        ({"overrides": [("max_chunks", 1)]}, "overrides must be a mapping of preset knobs to values"),
        ({"overrides": {"collection": "x"}}, "overrides['collection'] is not a preset override; pass it as Universal"),
        ({"overrides": {"max_chunk": 2}}, "unknown override(s) max_chunk; did you mean max_chunks? valid ones: "),
        ({"overrides": {"k": 2}}, "unknown override(s) k; did you mean max_chunks? valid ones: "),
        ({"overrides": {"max_chunks": "3"}}, "max_chunks ('3') must be a whole number"),
        ({"tags": "x"}, "UniversalRAGRetriever(tags=...): Input should be a valid list, not 'x'"),
    ],
)
def test_construction_errors_are_one_line_configuration_errors(arguments, message):
    """D6/D8: these were pydantic ValidationErrors of 3-4 lines, 'k' was pointed to overrides={'k': ...}, and
    overrides with a typo or a wrong type were taken, to fail at the first query."""
    with pytest.raises(ConfigurationError) as raised:
        UniversalRAGRetriever(**{"collection": "kb", **arguments})
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert "overrides={'k'" not in str(raised.value)


def test_overrides_are_stored_as_the_knobs_plain_values():
    retriever = UniversalRAGRetriever(collection="kb", overrides={"max_chunks": np.int64(2)})
    assert isinstance(retriever, BaseRetriever) and type(retriever.overrides["max_chunks"]) is int


def test_a_retriever_given_a_service_refuses_pickling_and_deep_copies_share_it(service):
    """D13: pickling failed with "Can't pickle local object 'create_engine.<locals>.connect'", a deep copy with
    "cannot pickle 'module' object"."""
    bound = UniversalRAGRetriever(service=service, context="search", collection="kb", overrides={"max_chunks": 1})
    with pytest.raises(ConfigurationError) as raised:
        pickle.dumps(bound)
    assert str(raised.value) == (
        "a UniversalRAGRetriever given service= cannot be pickled (the service holds this process's database "
        "connections and models); leave service unset, and the unpickled UniversalRAGRetriever uses "
        "get_universal_rag() of its process"
    )
    copied = copy.deepcopy(bound)
    assert copied.service is service and copied.overrides == bound.overrides and copied.overrides is not bound.overrides
    assert len(copied.invoke("backups")) == 1
    unbound = pickle.loads(pickle.dumps(UniversalRAGRetriever(collection="kb", overrides={"max_chunks": 1})))
    assert unbound.service is None and unbound.overrides == {"max_chunks": 1}
