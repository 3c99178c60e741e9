"""A collection that holds no documents is an error naming the existing ones, on every surface (issue 23.4).

Reads refuse the name (service, CLI, MCP, LangChain, LlamaIndex; the HTTP API in tests/server/test_api.py);
indexing into a new name still creates the collection.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from llama_index.core.retrievers import BaseRetriever as LlamaBaseRetriever

from rag_service.embed import HashingEmbedder
from rag_service.errors import UnknownCollectionError
from rag_service.integrations.langchain import UniversalRAGRetriever as LangChainRetriever
from rag_service.integrations.llama_index import UniversalRAGRetriever as LlamaIndexRetriever
from rag_service.service import UniversalRAGService
from tests.integration.knowledge import kb_service, write_docs
from tests.integration.test_cli import cli_env, rag  # noqa: F401  (the fixture, reused)
from tests.integration.test_mcp import mcp_env, server, session, text_of  # noqa: F401

MESSAGE = "collection 'kbb' does not exist; did you mean 'kb'? the collections are 'kb'"


@pytest.fixture
def service(db, settings, tmp_path, monkeypatch) -> UniversalRAGService:
    return kb_service(db, settings, tmp_path, monkeypatch)


def test_every_read_of_the_service_refuses_an_unknown_collection(service):
    reads = [
        lambda: service.retrieve("backups", collection="kbb"),
        lambda: service.ranked_candidates("backups", collection="kbb"),
        lambda: service.reindex_all(collection="kbb"),
        lambda: service.build_metadata(collection="kbb"),
        lambda: service.build_graph(collection="kbb"),
    ]
    for read in reads:
        with pytest.raises(UnknownCollectionError) as raised:
            read()
        assert str(raised.value) == MESSAGE
        assert raised.value.collection == "kbb" and raised.value.existing == ["kb"]


def test_indexing_creates_a_collection_and_the_next_read_sees_it(service, db, settings):
    other_process = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    with pytest.raises(UnknownCollectionError):
        service.retrieve("on-call rota", collection="notes")  # nothing cached from this miss
    report = other_process.index_texts([("oncall", "", "The on-call rota changes every Monday.")], collection="notes")
    assert report.ok and report.added == 1
    assert [c.source for c in service.retrieve("on-call rota", collection="notes").chunks] == ["oncall"]


def test_the_message_names_at_most_ten_collections_closest_first():
    from rag_service.db.collections import unknown_collection_message

    names = [f"team-{n:02d}" for n in range(30)]
    message = unknown_collection_message("team-07x", names)
    assert message.startswith("collection 'team-07x' does not exist; did you mean 'team-07'? the collections are ")
    assert message.endswith(" and 20 more") and message.count("'team-") == 12  # the name, the hint, ten listed
    assert unknown_collection_message("kb", []) == (
        "collection 'kb' does not exist: the database holds no documents yet; index documents into it first"
    )


@pytest.mark.multiprocess
def test_cli_commands_exit_1_with_one_line(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    write_docs(tmp_path / "kb")
    (tmp_path / ".git").mkdir()
    created = rag(cli_env, "reindex", "kb", "--collection", "kb", "--quiet", cwd=tmp_path)
    assert created.returncode == 0 and "2 added" in created.stdout, created.stderr
    for command in (
        ("query", "crash safety", "--collection", "kbb"),
        ("query", "crash safety", "--collection", "kbb", "--json"),
        ("reindex", "--all", "--collection", "kbb"),
        ("metadata", "build", "--collection", "kbb"),
        ("graph", "build", "--collection", "kbb"),
    ):
        result = rag(cli_env, *command)
        assert result.returncode == 1, (command, result.stdout)
        assert result.stderr == f"error: {MESSAGE}\n", command
        assert result.stdout == ""
    found = rag(cli_env, "query", "backups", "--collection", "kb")
    assert found.returncode == 0 and "[1] kb/ops.md" in found.stdout


@pytest.mark.multiprocess
def test_mcp_search_is_a_tool_error_naming_the_collections(mcp_env, tmp_path):  # noqa: F811
    write_docs(tmp_path / "kb")
    (tmp_path / ".git").mkdir()
    _, (indexed, unknown, found) = asyncio.run(
        session(
            server(mcp_env, tmp_path, "--allow-indexing"),
            [
                ("index_paths", {"paths": ["kb"], "collection": "kb"}),
                ("search_knowledge", {"query": "backups", "collection": "kbb"}),
                ("search_knowledge", {"query": "backups", "collection": "kb"}),
            ],
        )
    )
    assert not indexed.is_error
    assert unknown.is_error and text_of(unknown).endswith(f": {MESSAGE}")
    assert not found.is_error and text_of(found).startswith("[1] kb/")


def test_langchain_retriever_raises(service):
    retriever = LangChainRetriever(service=service, collection="kbb")
    with pytest.raises(UnknownCollectionError, match=re.escape(MESSAGE)):
        retriever.invoke("backups")
    with pytest.raises(UnknownCollectionError, match=re.escape(MESSAGE)):
        asyncio.run(retriever.ainvoke("backups"))


def test_llama_index_retriever_raises(service):
    retriever = LlamaIndexRetriever(service=service, collection="kbb")
    assert isinstance(retriever, LlamaBaseRetriever)
    with pytest.raises(UnknownCollectionError, match=re.escape(MESSAGE)):
        retriever.retrieve("backups")
    with pytest.raises(UnknownCollectionError, match=re.escape(MESSAGE)):
        asyncio.run(retriever.aretrieve("backups"))


def test_a_collection_name_typed_in_the_other_unicode_form_means_the_stored_one(service):
    """'naïve' typed composed (NFC: a keyboard, a web form) and a macOS folder's decomposed 'naïve' (NFD) are two
    strings that look the same: a read under one form said "collection 'naïve' does not exist; did you mean
    'naïve'?", and an ingest under it made a second collection beside the first, alike in every listing."""
    import unicodedata

    composed, decomposed = unicodedata.normalize("NFC", "naïve"), unicodedata.normalize("NFD", "naïve")
    assert composed != decomposed
    assert service.index_texts([("a.md", "", "# A\n\nThe replica keeps a copy.")], collection=decomposed).ok
    assert [c.source for c in service.retrieve("replica", collection=composed).chunks] == ["a.md"]
    assert service.require_collection(composed) == decomposed
    report = service.index_texts([("b.md", "", "# B\n\nThe replica lags behind.")], collection=composed)
    assert report.ok and report.added == 1
    assert [(c.name, c.documents) for c in service.collections() if c.name.startswith("na")] == [(decomposed, 2)]
    assert service.build_graph(collection=composed).collections == [decomposed]
    assert service.delete_document("b.md", collection=composed) == 1  # last: its lock lasts the test's transaction
