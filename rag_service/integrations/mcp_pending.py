"""Requests ``rag mcp`` has read and not answered yet: the end of stdin waits for their answers.

A client that writes its requests and closes its side of the pipe (``rag mcp < requests.jsonl``, a script's
``... | rag mcp``, a client half-closing after its last request) used to get "Connection closed" for every call
still running: the SDK ends its session when the stream it reads ends, cancelling what is in flight. Here the
stream of lines ends only once every request handed to the SDK was answered (or cancelled by the client).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

_CANCELLED = "notifications/cancelled"


class PendingRequests:
    """The ids of requests handed to the SDK whose response or error has not been written yet."""

    def __init__(self) -> None:
        self._ids: set[tuple[bool, Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def read(self, line: str) -> None:
        """Note a line handed to the SDK: a request's id, or a client's cancellation of one."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # the SDK answers what it cannot read
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        if message["method"] == _CANCELLED:  # a cancelled request gets no answer (MCP): nothing to wait for
            params = message.get("params")
            self._discard(params.get("requestId") if isinstance(params, dict) else None)
        elif "id" in message:
            self._ids.add(_key(message["id"]))
            self._idle.clear()

    def answered(self, message: Any) -> None:
        """Note a message written to the client: a response or an error ends its request."""
        from mcp_types import JSONRPCError, JSONRPCResponse

        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._discard(message.id)

    async def all_answered(self) -> None:
        """Return once every request read so far was answered."""
        await self._idle.wait()

    def _discard(self, request_id: Any) -> None:
        self._ids.discard(_key(request_id))
        if not self._ids:
            self._idle.set()


def _key(request_id: Any) -> tuple[bool, Any]:
    """An id as the SDK echoes it: 1 and "1" are different requests."""
    return isinstance(request_id, str), request_id if isinstance(request_id, str | int) else repr(request_id)


async def forward_answers(answers: Any, client: Any, pending: PendingRequests) -> None:
    """Write every message the SDK sends (``answers``, a stream's receive side) to ``client``, noting answers;
    close ``client`` when the SDK is done (the transport's writer ends with it)."""
    async with answers, client:
        async for session_message in answers:
            pending.answered(session_message.message)
            await client.send(session_message)
