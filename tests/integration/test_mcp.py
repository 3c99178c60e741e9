"""``rag mcp`` as an agent runs it: a subprocess over stdio, driven by the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_service.db.admin import admin_params
from rag_service.db.collections import CollectionInfo
from rag_service.errors import ConfigurationError
from rag_service.integrations.mcp_server import build_server, unknown_tool_message
from tests.integration.knowledge import write_docs

pytestmark = pytest.mark.multiprocess


@pytest.fixture
def mcp_env(database_factory, tmp_path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        RAG_DATABASE_URL=database_factory.create("rag_mcp"),
        RAG_EMBEDDING_MODEL="hashing",
        RAG_RERANK_MODEL="none",
        RAG_DATA_DIR=str(tmp_path / "data"),
    )
    subprocess.run([sys.executable, "-m", "rag_service.cli", "db", "upgrade"], env=env, check=True, capture_output=True)
    return env


def server(env: dict[str, str], cwd: Path, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "rag_service.cli", "mcp", *flags], env=env, cwd=str(cwd)
    )


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content)


async def session(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list]:
    async with Client(params, read_timeout_seconds=60) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        results = [await client.call_tool(name, arguments) for name, arguments in calls]
    return tools, results


def test_search_and_list_with_indexing_allowed(mcp_env, tmp_path):
    write_docs(tmp_path / "kb")
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    tools, (indexed, noted, listed, found, narrowed, unknown, missing, failed) = asyncio.run(
        session(
            server(mcp_env, tmp_path, "--allow-indexing"),
            [
                ("index_paths", {"paths": ["kb"], "collection": "kb"}),
                ("index_text", {"source": "notes/oncall", "text": "The on-call rota changes every Monday at " * 3,
                                "collection": "notes"}),
                ("list_collections", {}),
                ("search_knowledge", {"query": "How long are nightly backups kept?", "collection": "kb"}),
                ("search_knowledge", {"query": "reranking", "collection": "kb", "context": "search",
                                      "max_chunks": 1}),
                ("search_knowledge", {"query": "backups", "context": "nope", "collection": "kb"}),
                ("index_paths", {"paths": ["nowhere"], "collection": "kb"}),
                ("index_text", {"source": "bad.md", "text": "a\u0000b", "collection": "notes"}),
            ],
        )
    )
    assert sorted(tools) == ["index_paths", "index_text", "list_collections", "search_knowledge"]
    assert not indexed.is_error and "2 added" in text_of(indexed)
    assert not noted.is_error and "1 added" in text_of(noted)
    assert not listed.is_error
    with psycopg.connect(**admin_params(mcp_env["RAG_DATABASE_URL"])) as conn:
        stored = dict(conn.execute("SELECT collection, count(*) FROM document_chunks GROUP BY collection").fetchall())
    collections = [
        {"name": "kb", "documents": 2, "chunks": stored["kb"]},
        {"name": "notes", "documents": 1, "chunks": stored["notes"]},
    ]
    assert json.loads(text_of(listed)) == listed.structured_content == {"collections": collections}
    context = text_of(found)
    assert not found.is_error and context.startswith("[1] kb/ops.md")
    assert "§ Operations > Backups" in context and "kept for thirty days" in context
    assert text_of(narrowed).startswith("[1] kb/search.md") and text_of(narrowed).count("§") == 1
    assert unknown.is_error  # the tool's name before our one line (the SDK's was "Error executing tool ...: ")
    assert text_of(unknown) == ("search_knowledge: unknown context 'nope'; valid contexts: chatbot, agent, search, "
                                "workflow, context_engineering")
    # a path that does not exist and a failed document are errors, as rag reindex exits 1: isError was false
    assert missing.is_error
    assert text_of(missing).endswith("error: 'nowhere' does not exist (any other path was indexed)")
    assert failed.is_error and "failed: bad.md: its text contains NUL bytes" in text_of(failed)


def test_without_the_flag_an_agent_cannot_index(mcp_env, tmp_path):
    tools, (refused, empty) = asyncio.run(
        session(
            server(mcp_env, tmp_path),
            [("index_paths", {"paths": ["."]}), ("search_knowledge", {"query": "backups"})],
        )
    )
    assert sorted(tools) == ["list_collections", "search_knowledge"]
    assert refused.is_error and text_of(refused) == (
        "unknown tool 'index_paths'; the tools are list_collections, search_knowledge "
        "(index_paths and index_text need rag mcp --allow-indexing)"
    )
    assert empty.is_error and text_of(empty).endswith(  # issue 23: an unknown collection is an error, not silence
        ": collection 'default' does not exist: the database holds no documents yet; index documents into it first"
    )


def test_an_unknown_tool_names_the_nearest_and_every_tool():
    tools = ["list_collections", "search_knowledge"]
    assert unknown_tool_message("search", tools) == (
        "unknown tool 'search'; did you mean 'search_knowledge'? the tools are list_collections, search_knowledge"
    )
    assert unknown_tool_message("summarize", tools) == (
        "unknown tool 'summarize'; the tools are list_collections, search_knowledge"
    )


def _one_request(env: dict[str, str], cwd: Path, *flags: str) -> str:
    """Run ``rag mcp``, list its tools and call one over raw JSON-RPC, close stdin (it exits) and return its
    stderr."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_collections", "arguments": {}}},
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "rag_service.cli", "mcp", *flags],
        env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(messages[0]) + "\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1
    process.stdin.write("".join(json.dumps(m) + "\n" for m in messages[1:]))
    process.stdin.flush()
    assert "search_knowledge" in process.stdout.readline()
    assert json.loads(process.stdout.readline())["id"] == 3
    _, stderr = process.communicate(timeout=60)
    return stderr


def test_stderr_is_quiet_by_default_and_info_logs_each_request_once(mcp_env, tmp_path):
    quiet = _one_request(mcp_env, tmp_path)
    assert "INFO" not in quiet and "Processing request" not in quiet, quiet  # issue 23.7e
    by_flag = _one_request(mcp_env, tmp_path, "--log-level", "info")
    by_setting = _one_request({**mcp_env, "RAG_LOG_LEVEL": "INFO"}, tmp_path)
    for stderr in (by_flag, by_setting):  # the SDK logs no request; ours, once, and no line twice
        info = [line for line in stderr.splitlines() if "INFO" in line]
        lines = [re.sub(r"^.*?INFO\s+(rag_service[\w.]*:\s+)?", "", line) for line in info]  # the message
        assert sum("tool list_collections {}: ok in" in line for line in lines) == 1, stderr
        assert len(lines) == len(set(lines)), stderr


def _initialized_raw_server(
    env: dict[str, str], cwd: Path, *, before: Callable[[Callable[[str], dict[str, Any]]], None] = lambda _: None
) -> tuple[subprocess.Popen[str], Callable[[str], dict[str, Any]]]:
    """``rag mcp`` after ``initialize`` over raw JSON-RPC lines, and ``answer(line)``: the line's one answer;
    ``before(answer)`` runs first, before ``initialize``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "rag_service.cli", "mcp"],
        env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None

    def answer(line: str) -> dict[str, Any]:
        process.stdin.write(line + "\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        return json.loads(process.stdout.readline())  # type: ignore[union-attr]

    before(answer)
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    assert answer(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))["id"] == 1
    return process, answer


def test_a_line_the_sdk_cannot_read_is_answered_not_dropped(mcp_env, tmp_path):
    """The SDK's transport dropped such lines: a client waited forever for request 903, or for a query holding an
    escaped lone surrogate (valid JSON that pydantic's parser refuses)."""
    process, answer = _initialized_raw_server(mcp_env, tmp_path)
    process.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n\n')  # type: ignore[union-attr]  # and a blank line
    parse = answer("this is not json")
    assert parse["id"] is None and parse["error"]["code"] == -32700
    invalid = answer('{"jsonrpc": "2.0", "id": 903, "method": "ping", "params": "x"}')
    assert invalid["id"] == 903 and invalid["error"]["code"] == -32600
    assert "not a JSON-RPC 2.0 message" in invalid["error"]["message"]
    arguments = '{"query": "kites \\ud800", "collection": "nowhere"}'
    searched = answer(f'{{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {{"name": "search_knowledge", '
                      f'"arguments": {arguments}}}}}')  # fmt: skip
    assert searched["id"] == 4 and searched["result"]["isError"], searched  # served: the collection is unknown
    assert answer('{"jsonrpc": "2.0", "id": 5, "method": "ping"}') == {"jsonrpc": "2.0", "id": 5, "result": {}}
    process.communicate(timeout=60)
    assert process.returncode == 0


def test_a_wrong_or_unknown_argument_is_one_line_naming_it():
    """The SDK answered pydantic's multi-line dump ("1 validation error for search_knowledgeArguments ... For
    further information visit ..."), ignored an unknown argument and took "3" and true for an integer (which
    ``retrieve()`` refuses); no service is reached by these calls."""
    from mcp.server.mcpserver.exceptions import ToolError

    server = build_server(None)  # type: ignore[arg-type]
    calls = {
        "search_knowledge: query: Field required": {},
        "search_knowledge: unknown argument(s) ['max_chunk']; did you mean 'max_chunks'? the arguments are query, "
        "context, collection, max_chunks, min_relevance, max_tokens": {"query": "x", "max_chunk": 2},
        "search_knowledge: unknown argument(s) ['top_k']; did you mean 'max_chunks'? the arguments are query, "
        "context, collection, max_chunks, min_relevance, max_tokens": {"query": "x", "top_k": 2},  # audit 53b 6
        # a knob's value: the library's line, as Python, the CLI and HTTP give it (audit 53b 7); "3" was taken as 3
        "search_knowledge: max_chunks ('3') must be a whole number; send 3 without quotes": {"query": "x",
                                                                                           "max_chunks": "3"},
        "search_knowledge: max_chunks (True) must be a whole number": {"query": "x", "max_chunks": True},
        "search_knowledge: max_chunks (3.0) must be an int, not float; pass 3": {"query": "x", "max_chunks": 3.0},
        "search_knowledge: max_chunks (0) must be between 1 and 1000": {"query": "x", "max_chunks": 0},
        "search_knowledge: min_relevance (2) must be between 0 and 1": {"query": "x", "min_relevance": 2},
        "search_knowledge: context must be string, not 3": {"query": "x", "context": 3},
    }  # fmt: skip
    for message, arguments in calls.items():
        with pytest.raises(ToolError) as raised:
            asyncio.run(server.call_tool("search_knowledge", arguments))
        assert str(raised.value) == message


class _Recording:
    """A service whose ``aretrieve`` records its overrides, or raises ``error``."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.overrides: dict[str, Any] | None = None

    async def aretrieve(self, query: str, context: str, *, collection: str, **overrides: Any) -> Any:
        if self.error is not None:
            raise self.error
        self.overrides = overrides
        return SimpleNamespace(formatted_context="[1] a.md", metrics=SimpleNamespace(degraded=[]))


def test_a_null_knob_is_not_given_and_a_library_error_has_the_tools_prefix():
    """null is the preset's value, as the tool's schema (integer or null) and POST /api/rag/retrieve say (README);
    a library error read "Error executing tool search_knowledge: ...", an argument's error "search_knowledge: ..."."""
    from mcp.server.mcpserver.exceptions import ToolError

    service = _Recording()
    arguments = {"query": "x", "max_chunks": None, "min_relevance": None, "max_tokens": 50}
    asyncio.run(build_server(service).call_tool("search_knowledge", arguments))  # type: ignore[arg-type]
    assert service.overrides == {"max_tokens": 50}
    failing = _Recording(ConfigurationError("vector_weight and keyword_weight are both 0; give at least one arm"))
    with pytest.raises(ToolError) as raised:
        asyncio.run(build_server(failing).call_tool("search_knowledge", {"query": "x"}))  # type: ignore[arg-type]
    assert str(raised.value) == "search_knowledge: vector_weight and keyword_weight are both 0; give at least one arm"


def test_a_deep_line_or_a_request_with_an_id_the_sdk_drops_is_answered_and_the_server_lives_on(mcp_env, tmp_path):
    """A line nested ~1,000 deep ended the server (json.loads' RecursionError); a request whose id is null, a bool,
    a float or a list was taken for a notification by the SDK and never answered."""
    process, answer = _initialized_raw_server(mcp_env, tmp_path)
    process.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')  # type: ignore[union-attr]
    deep = "[" * 1000 + "]" * 1000
    call = '{"name": "search_knowledge", "arguments": {"query": "x", "collection": ' + deep + "}}"
    nested = answer('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": ' + call + "}")
    assert nested["id"] is None and nested["error"]["code"] == -32600
    assert "nests 1003 levels of objects and arrays; send at most 64" in nested["error"]["message"]
    for request_id in ("null", "true", "1.5", "[1]", "2.0"):
        dropped = answer('{"jsonrpc": "2.0", "id": ' + request_id + ', "method": "tools/list"}')
        assert dropped["error"]["code"] == -32600, dropped
        assert f"a request's id must be a string or an integer, not {request_id}" in dropped["error"]["message"]
    assert answer('{"jsonrpc": "2.0", "id": 5, "method": "ping"}') == {"jsonrpc": "2.0", "id": 5, "result": {}}
    process.communicate(timeout=60)
    assert process.returncode == 0


def test_requests_sent_before_stdin_ends_are_answered_not_cancelled(mcp_env, tmp_path):
    """``rag mcp < requests.jsonl``: every call still running when stdin ended was answered -32000 "Connection
    closed", since the SDK ends its session with the stream it reads."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    search = {"name": "search_knowledge", "arguments": {"query": "kites", "collection": "nowhere"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_collections", "arguments": {}}},
    ]
    piped = subprocess.run(
        [sys.executable, "-m", "rag_service.cli", "mcp"], env=mcp_env, cwd=tmp_path, capture_output=True, text=True,
        input="".join(json.dumps(line) + "\n" for line in lines), timeout=120,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    answers = {message["id"]: message for message in map(json.loads, piped.stdout.splitlines())}
    assert set(answers) == {1, 2, 3} and not any("error" in answers[i] for i in (2, 3)), piped.stdout
    assert answers[2]["result"]["isError"] and "nowhere" in answers[2]["result"]["content"][0]["text"]
    assert '"collections"' in answers[3]["result"]["content"][0]["text"]


def test_an_unknown_argument_of_list_collections_names_its_arguments():
    from mcp.server.mcpserver.exceptions import ToolError

    with pytest.raises(ToolError) as raised:
        asyncio.run(build_server(None).call_tool("list_collections", {"x": 1}))  # type: ignore[arg-type]
    assert str(raised.value) == "list_collections: unknown argument(s) ['x']; the arguments are match, limit"


class _Catalog:
    """A service holding only a catalogue of ``count`` collections."""

    def __init__(self, count: int) -> None:
        self.infos = [CollectionInfo(f"team-{i:04d}", 3, 40) for i in range(count)]

    def collections(self) -> list[CollectionInfo]:
        return self.infos


def test_list_collections_of_a_team_with_hundreds_of_collections_is_bounded_and_searchable():
    """A team's 333 collections came back as one 51,794-character answer into the agent's context (1,000 would be
    ~150,000): the first 100 by name, how many more, and ``match`` to find the rest."""
    from mcp.server.mcpserver.exceptions import ToolError

    server = build_server(_Catalog(1000))  # type: ignore[arg-type]

    def call(**arguments: Any) -> dict[str, Any]:
        return cast(dict[str, Any], asyncio.run(server.call_tool("list_collections", arguments)).structured_content)

    listed = call()
    assert len(listed["collections"]) == 100 and listed["collections"][0]["name"] == "team-0000"
    assert listed["more"] == 900 and "pass match" in listed["hint"]
    assert len(json.dumps(listed)) < 10_000
    found = call(match="TEAM-09")
    assert [c["name"] for c in found["collections"]] == [f"team-{i:04d}" for i in range(900, 1000)]
    assert "more" not in found  # all 100 that match
    assert call(match="team-0999", limit=5) == {"collections": [{"name": "team-0999", "documents": 3, "chunks": 40}]}
    with pytest.raises(ToolError) as raised:
        call(limit=0)
    assert str(raised.value) == "list_collections: limit must be 1-1000, not 0; pass match to narrow the list"
    assert call(limit=1000)["collections"][-1]["name"] == "team-0999"


def test_the_sdks_bare_invalid_params_error_names_what_was_wrong(mcp_env, tmp_path):
    """The SDK answers these "-32602 Invalid request parameters" with empty data, naming neither cause nor fix."""
    early: list[dict[str, Any]] = []

    def too_early(answer: Callable[[str], dict[str, Any]]) -> None:
        early.append(answer('{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}'))
        early.append(answer('{"jsonrpc": "2.0", "id": "b", "method": "initialize", "params": {}}'))

    process, answer = _initialized_raw_server(mcp_env, tmp_path, before=too_early)
    process.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')  # type: ignore[union-attr]
    nameless = answer('{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"arguments": {}}}')
    process.communicate(timeout=60)
    messages = [reply["error"]["message"] for reply in (*early, nameless)]
    assert messages == [
        "Invalid request parameters: tools/list came before initialize; send initialize, then "
        "notifications/initialized, first",
        'Invalid request parameters: initialize takes params {"protocolVersion": "2025-06-18", "capabilities": {}, '
        '"clientInfo": {"name": ..., "version": ...}}',
        'Invalid request parameters: tools/call takes params {"name": "<a tool of tools/list>", "arguments": {...}}',
    ]
    assert all(reply["error"]["code"] == -32602 for reply in (*early, nameless))
