"""The lines ``rag mcp`` reads, checked before the SDK's transport: what it cannot read is answered, not dropped.

The SDK's stdio transport drops a line it cannot validate (it logs at DEBUG only), so a client waits forever
for the answer to a request it sent: a query holding an escaped lone surrogate (valid JSON, which pydantic's
parser refuses), ``"params": "x"``, text that is no JSON. Here a line that is no JSON gets JSON-RPC's parse
error (-32700, id null), a message the SDK would refuse gets invalid request (-32600) with its id, and lone
surrogates become U+FFFD so the request is served. A request whose id is neither a string nor an integer (the SDK
takes it for a notification and never answers) and a line nested too deeply to parse (it ended the server) get
invalid request too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_NOT_A_MESSAGE = (
    'Invalid Request: not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0", a "method", an "id" for a '
    'request, "params" an object)'
)
#: sends one JSON-RPC error: (id or None, code, message)
Reply = Callable[[Any, int, str], Awaitable[None]]


async def checked_line(line: str, reply: Reply) -> tuple[str, Any] | None:
    """``line`` as the SDK's transport can read it and the message it holds (parsed once, here: the end of stdin
    tracks it, ``mcp_pending``), or None once it was answered here with an error."""
    from mcp_types import jsonrpc_message_adapter

    if not line.strip():  # a blank line between messages: nothing to answer
        return None
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:  # pydantic's ValidationError
        log.debug("the SDK's reason: %s", exc)  # a union's four dumps: no line for a client
    else:
        message = json.loads(line)  # the SDK read it, so it nests too little to recurse far
        if (problem := _request_id_problem(message)) is None:
            return line, message  # the usual case: read once more by the SDK
        await reply(None, INVALID_REQUEST, problem)
        return None
    if (depth := nesting_depth(line)) > MAX_DEPTH:  # json.loads would recurse past Python's limit: the server ended
        too_deep = f"Invalid Request: the message nests {depth} levels of objects and arrays; send at most {MAX_DEPTH}"
        await reply(None, INVALID_REQUEST, too_deep)
        return None
    try:
        message = json.loads(line)
    except ValueError as exc:
        await reply(None, PARSE_ERROR, f"Parse error: {exc}; send one JSON-RPC 2.0 message per line")
        return None
    if (cleaned := _without_lone_surrogates(message)) != message:
        line = json.dumps(cleaned, ensure_ascii=False) + "\n"
        with contextlib.suppress(ValueError):
            jsonrpc_message_adapter.validate_json(line, by_name=False)
            return line, cleaned
    request_id = cleaned.get("id") if isinstance(cleaned, dict) else None
    valid_id = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    batch = "; batches are not supported, send one message per line" if isinstance(cleaned, list) else ""
    await reply(request_id if valid_id else None, INVALID_REQUEST, f"{_NOT_A_MESSAGE}{batch}")
    return None


#: objects and arrays a line the SDK refused may nest before it is parsed here (json.loads recurses ~1,000 deep; the
#: SDK's own parser refuses more than ~200 levels, so a line it reads is never that deep)
MAX_DEPTH = 64


def nesting_depth(line: str) -> int:
    """How deeply ``line``'s JSON nests objects and arrays (brackets inside strings not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _request_id_problem(message: Any) -> str | None:
    """Why a message the SDK reads is a request it would never answer (an id neither a string nor an integer: the
    SDK takes it for a notification), else None."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    request_id = message["id"]
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return None
    return (
        f"Invalid Request: a request's id must be a string or an integer, not {json.dumps(request_id)[:40]}; "
        "a notification has no id"
    )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins a pair into one character: any left is lone


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate of its strings (and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def sender(write_stream: Any) -> Reply:
    """A ``Reply`` that writes through the SDK's own stream (its writer serialises every message)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    async def reply(request_id: Any, code: int, message: str) -> None:
        log.warning("rag mcp: answered a request it could not read with %d: %s", code, message)
        error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
        await write_stream.send(SessionMessage(error))

    return reply
