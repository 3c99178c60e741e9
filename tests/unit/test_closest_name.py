"""``closest_name``: the "did you mean" of unknown collections, contexts and MCP tools."""

from __future__ import annotations

from rag_service.db.collections import unknown_collection_message
from rag_service.errors import closest_name, did_you_mean

CONTEXTS = ["chatbot", "agent", "search", "workflow", "context_engineering"]


def test_a_name_in_another_case_is_the_one_meant():
    assert closest_name("Agent", CONTEXTS) == "agent"
    assert closest_name("WORKFLOW", CONTEXTS) == "workflow"
    assert unknown_collection_message("KB", ["kb", "odd", "web"]) == (
        "collection 'KB' does not exist; did you mean 'kb'? the collections are 'kb', 'odd', 'web'"
    )


def test_a_typo_finds_the_closest_and_nonsense_finds_none():
    assert closest_name("chatbto", CONTEXTS) == "chatbot"
    assert closest_name("Context-Engineering", CONTEXTS) == "context_engineering"
    assert closest_name("nope", CONTEXTS) is None
    assert closest_name("search", ["list_collections", "search_knowledge"], cutoff=0.5) == "search_knowledge"


def test_a_long_name_is_no_typo():
    assert closest_name("agent" * 100, CONTEXTS) is None


def test_the_hint_is_empty_or_one_question():
    assert did_you_mean("Agent", CONTEXTS) == "did you mean 'agent'? "
    assert did_you_mean("max_chunk", ["max_chunks"], quoted=False) == "did you mean max_chunks? "
    assert did_you_mean("nope", CONTEXTS) == ""
