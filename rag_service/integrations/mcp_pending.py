"""Requests ``rag mcp`` has read and not answered yet: the end of stdin waits for their answers.

A client that writes its requests and closes its side of the pipe (``rag mcp < requests.jsonl``, a script's
``... | rag mcp``, a client half-closing after its last request) used to get "Connection closed" for every call
still running: the SDK ends its session when the stream it reads ends, cancelling what is in flight. Here the
stream of lines ends only once every request handed to the SDK was answered (or cancelled by the client).

The SDK answers a request before ``initialize``, or one whose params miss the schema (``tools/call`` without a name,
``arguments`` not an object), with a bare "-32602 Invalid request parameters"; the forwarder, which knows the
request, names what was wrong (``explained``).
"""

from __future__ import annotations

import asyncio
from typing import Any

_CANCELLED = "notifications/cancelled"
INVALID_PARAMS = -32602
_BARE = "Invalid request parameters"
#: the params of the methods a client sends most, as the bare error's fix
_TAKES = {
    "tools/call": '{"name": "<a tool of tools/list>", "arguments": {...}}',
    "initialize": '{"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": ..., "version": ...}}',
}


class PendingRequests:
    """The ids of requests handed to the SDK whose response or error has not been written yet."""

    def __init__(self) -> None:
        self._methods: dict[tuple[bool, Any], str] = {}  # each request not answered yet, by id: its method
        self._initialized = False  # an initialize request was answered with a result
        self._idle = asyncio.Event()
        self._idle.set()

    def read(self, message: Any) -> None:
        """Note a message handed to the SDK (as ``mcp_lines.checked_line`` parsed it): a request's id, or a
        client's cancellation of one."""
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        if message["method"] == _CANCELLED:  # a cancelled request gets no answer (MCP): nothing to wait for
            params = message.get("params")
            self._discard(params.get("requestId") if isinstance(params, dict) else None)
        elif "id" in message:
            self._methods[_key(message["id"])] = message["method"]
            self._idle.clear()

    def answered(self, message: Any) -> None:
        """Note a message written to the client: a response or an error ends its request."""
        from mcp_types import JSONRPCError, JSONRPCResponse

        if isinstance(message, JSONRPCResponse | JSONRPCError):
            if isinstance(message, JSONRPCResponse) and self._methods.get(_key(message.id)) == "initialize":
                self._initialized = True
            self._discard(message.id)

    def explained(self, message: Any) -> Any:
        """``message``, or the SDK's bare invalid-params error of a request named: before ``initialize``, or its
        params not what the method takes."""
        from mcp_types import ErrorData, JSONRPCError

        if not isinstance(message, JSONRPCError):
            return message
        error = message.error
        if (error.code, error.message) != (INVALID_PARAMS, _BARE) or error.data not in (None, ""):
            return message
        method = self._methods.get(_key(message.id), "the request")
        if not self._initialized and method != "initialize":
            why = f"{method} came before initialize; send initialize, then notifications/initialized, first"
        elif method in _TAKES:
            why = f"{method} takes params {_TAKES[method]}"
        else:
            why = f"the params of {method} are not what the MCP schema has for it (params must be an object)"
        named = ErrorData(code=INVALID_PARAMS, message=f"{_BARE}: {why}", data=error.data)
        return JSONRPCError(jsonrpc=message.jsonrpc, id=message.id, error=named)

    async def all_answered(self) -> None:
        """Return once every request read so far was answered."""
        await self._idle.wait()

    def _discard(self, request_id: Any) -> None:
        self._methods.pop(_key(request_id), None)
        if not self._methods:
            self._idle.set()


def _key(request_id: Any) -> tuple[bool, Any]:
    """An id as the SDK echoes it: 1 and "1" are different requests."""
    return isinstance(request_id, str), request_id if isinstance(request_id, str | int) else repr(request_id)


async def forward_answers(answers: Any, client: Any, pending: PendingRequests) -> None:
    """Write every message the SDK sends (``answers``, a stream's receive side) to ``client``, noting answers;
    close ``client`` when the SDK is done (the transport's writer ends with it)."""
    async with answers, client:
        async for session_message in answers:
            explained = pending.explained(session_message.message)
            pending.answered(session_message.message)
            if explained is not session_message.message:
                session_message = type(session_message)(explained, session_message.metadata)
            await client.send(session_message)
