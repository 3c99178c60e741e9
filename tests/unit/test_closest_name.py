"""``closest_name``: the "did you mean" of unknown collections, contexts and MCP tools."""

from __future__ import annotations

import pytest

from rag_service.db.collections import unknown_collection_message, validate_collection
from rag_service.errors import ConfigurationError, closest_name, did_you_mean

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


def test_a_nul_in_a_collection_name_is_named_as_the_problem():
    """D12: 'nul\\x00name' was told it "must be 1-200 characters, not blank": it is 8 characters, not blank."""
    with pytest.raises(ConfigurationError) as raised:
        validate_collection("nul\x00name")
    assert str(raised.value) == (
        "collection name 'nul\\x00name' contains a NUL character (\\x00), which PostgreSQL cannot store; remove it"
    )
    with pytest.raises(ConfigurationError, match=r"^collection name 'xxx.*…' has 201 characters; it must be 1-200"):
        validate_collection("x" * 201)
    assert validate_collection("tab\there") == "tab\there", "other control characters are stored as they are"


def test_long_collection_names_are_cut_in_the_unknown_collection_message():
    """D12: one 200-character collection was shown whole in every "does not exist" line."""
    long = "a" * 200
    names = [long, *(f"team-{n:02d}" for n in range(30))]
    message = unknown_collection_message("b" * 200, names)
    assert f"'{'a' * 59}…'" in message and "a" * 60 not in message
    assert message.startswith(f"collection '{'b' * 59}…' does not exist; the collections are ")
    assert message.endswith(" and 21 more") and "\n" not in message and len(message) < 400
