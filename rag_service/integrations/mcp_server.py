"""``rag mcp``: a Model Context Protocol server over stdio (extra ``mcp``, the official SDK).

Tools: ``search_knowledge(query, context?, collection?, max_chunks?, min_relevance?, max_tokens?)`` returns the
formatted context with ``[n]`` citations (or the one line "no relevant passages for ..." when every
result was below the relevance floor), then a ``degraded: <stage>: <reason>`` line for each stage
that did not run as configured; ``list_collections(match?, limit?)`` returns ``{"collections": [{name, documents,
chunks}]}``, the first 100 by name unless ``limit`` says otherwise (``more`` and ``hint`` say what was left out).
With ``--allow-indexing [DIR ...]`` also ``index_paths(paths, collection?)`` (inside those folders only, the
working directory by default, and never a hidden path: ``mcp_roots``) and
``index_text(source, text, title?, collection?)``; without it an agent cannot change the index.

Library errors reach the client as tool errors (``is_error``): ``<tool>: <the one-line message>``; so does a call of
a tool the server lacks, naming the nearest tool and every tool (``unknown_tool_message``). Nothing
but the protocol is written to stdout; logs go to stderr, warnings only unless ``--log-level`` (or
``RAG_LOG_LEVEL``) asks for more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from rag_service.config import Settings
from rag_service.errors import ConfigurationError, RagError, did_you_mean
from rag_service.heap import freeze_startup_objects
from rag_service.integrations import mcp_roots, require_extra
from rag_service.integrations.mcp_lines import Reply, checked_line, sender
from rag_service.integrations.mcp_pending import PendingRequests, forward_answers
from rag_service.knobs import PRESET_KNOBS, name_hint
from rag_service.log import configure_logging
from rag_service.shutdown import stop_received

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from rag_service import IngestReport
    from rag_service.service import UniversalRAGService

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LOG_LEVELS: tuple[LogLevel, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_log = logging.getLogger(__name__)

#: at most this long ``rag mcp`` waits for the warm-up before it serves (a first start's one-time ONNX
#: export takes longer; the first call then waits for the model instead of the client's initialize)
WARM_UP_WAIT_S = 10.0

#: the tools ``--allow-indexing`` adds
INDEXING_TOOLS = ("index_paths", "index_text")

#: the preset ``search_knowledge`` uses when the client names none
DEFAULT_CONTEXT = "agent"

INSTRUCTIONS = (
    "Search the indexed documents with search_knowledge before answering questions about them; "
    "cite passages by their [n] source numbers. list_collections shows what is indexed."
)


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Turn a library error into a tool error whose text is the library's one-line message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except RagError as exc:
        raise ToolError(str(exc)) from exc


def build_server(
    service: UniversalRAGService,
    *,
    allow_indexing: bool = False,
    log_level: LogLevel = "WARNING",
    index_roots: Sequence[Path] | None = None,
) -> MCPServer:
    """An MCP server whose tools call ``service``; indexing tools only with ``allow_indexing``, ``index_paths``
    inside ``index_roots`` only (default: the working directory; ``mcp_roots``).

    ``log_level`` is the SDK's (it configures the root logger): WARNING keeps stderr quiet, where the
    SDK's default INFO logs a line for every request an agent makes.
    """
    require_extra("mcp.server.mcpserver", extra="mcp", feature="rag mcp")
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class Server(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            """``_call``, logged at INFO with its arguments, outcome and time (the SDK logs no request)."""
            started, outcome = time.perf_counter(), "failed"
            try:
                result = await self._call(name, arguments, context)
                outcome = "ok"
                return result
            finally:
                spent = (time.perf_counter() - started) * 1000
                _log.info("tool %s %s: %s in %.0f ms", name, json.dumps(arguments)[:200], outcome, spent)

        async def _call(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
            """The SDK's call, but an unknown tool's error names the tools there are, an unknown argument is
            refused (the SDK ignored it) and a wrong one is one line (the SDK's was pydantic's whole dump)."""
            tools = {tool.name: tool for tool in await self.list_tools()}
            if name not in tools:
                raise ToolError(unknown_tool_message(name, sorted(tools)))
            properties = tools[name].input_schema.get("properties", {})
            known = list(properties)
            if unknown := sorted(set(arguments or {}) - set(known)):
                hint = name_hint(unknown[0], known, quoted=True)  # top_k: max_chunks, as every entry says
                takes = f"the arguments are {', '.join(known)}" if known else "it takes no arguments"
                raise ToolError(f"{name}: unknown argument(s) {unknown}; {hint}{takes}")
            for argument, value in (arguments or {}).items():
                knob = PRESET_KNOBS.get(argument)
                if knob is not None and value is not None and (problem := knob.sent_problem(value)):
                    raise ToolError(f"{name}: {problem}")  # the library's line, as every entry gives it
                if expected := wrong_kind(properties[argument], value):
                    raise ToolError(f"{name}: {argument} must be {expected}, not {json.dumps(value)[:60]}")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if type(exc.__cause__) is ToolError:  # ours (_tool_errors): "search_knowledge: ", not the SDK's
                    raise ToolError(f"{name}: {exc.__cause__}") from exc.__cause__  # "Error executing tool ...: "
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                wrong = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.__cause__.errors()[:3]]
                raise ToolError(f"{name}: {'; '.join(wrong)}") from exc

    server: MCPServer = Server("rag_service", instructions=INSTRUCTIONS, log_level=log_level)

    @server.tool()
    async def search_knowledge(
        query: str,
        context: str = DEFAULT_CONTEXT,
        collection: str = "default",
        max_chunks: int | None = None,
        min_relevance: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """Search the knowledge base; returns the most relevant passages grouped by source with [n] citations.

        context: retrieval preset (agent, chatbot, search, workflow, context_engineering);
        collection: which collection to search; max_chunks: at most this many passages;
        min_relevance: no passages unless the best reaches this relevance (0..1), and none below 0.4
        of it (the preset's floor by default); max_tokens: the passages' token budget (tiktoken), exact.
        A knob left out or null takes the preset's value.
        """
        given = {"max_chunks": max_chunks, "min_relevance": min_relevance, "max_tokens": max_tokens}
        overrides: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
        with _tool_errors():
            result = await service.aretrieve(query, context, collection=collection, **overrides)
        answer = result.formatted_context  # "no relevant passages ..." as every entry says it, within the budget
        # the agent must know when a stage (reranking, expansion, ...) did not run: one line each
        notes = [f"degraded: {reason}" for reason in result.metrics.degraded]
        return "\n\n".join(part for part in (answer, "\n".join(notes)) if part)

    @server.tool()
    def list_collections(match: str | None = None, limit: int = LISTED_COLLECTIONS) -> dict[str, Any]:
        """The collections that hold documents, by name, with their document and chunk counts: at most ``limit``
        (1-1000; ``more`` counts the rest); ``match``: only names containing it, in any case."""
        if isinstance(limit, int) and not 1 <= limit <= MAX_LISTED_COLLECTIONS:
            raise ToolError(f"limit must be 1-{MAX_LISTED_COLLECTIONS}, not {limit}; pass match to narrow the list")
        with _tool_errors():
            return listed_collections(service.collections(), match=match, limit=limit)

    if allow_indexing:
        roots = tuple(index_roots) if index_roots is not None else mcp_roots.index_roots([])
        where = (
            "Index files and folders into a collection; incremental. Only paths inside "
            f"{mcp_roots.describe(roots)} (on the server's machine; relative ones from {Path.cwd()}), and no hidden "
            "file or folder."
        )

        @server.tool(description=where)
        def index_paths(paths: list[str], collection: str = "default") -> str:
            if (refusal := mcp_roots.check_paths(paths, roots)) is not None:
                raise ToolError(refusal)
            with _tool_errors():
                report = service.index_paths(paths, collection=collection)
            missing = [p for p in paths if isinstance(p, str) and not os.path.lexists(p)]
            return _reported(report, missing)

        @server.tool()
        def index_text(source: str, text: str, title: str = "", collection: str = "default") -> str:
            """Index one text under the name ``source`` (replacing an earlier text of that name), chunked as a
            file of that name would be (``errors.md``: by its headers)."""
            from rag_service.service_documents import NewDocument

            with _tool_errors():
                report = service.index_documents([NewDocument(source, text, title)], collection=collection)
            return _reported(report, [])

    return server


#: collections ``list_collections`` returns unless asked for more: an agent's context is no catalogue (333
#: collections were 51,794 characters of one answer); ``match`` finds the others
LISTED_COLLECTIONS = 100
MAX_LISTED_COLLECTIONS = 1000


class _Listed(Protocol):
    """What ``list_collections`` reads of each ``UniversalRAGService.collections()`` entry."""

    @property
    def name(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


def listed_collections(infos: Sequence[_Listed], *, match: str | None, limit: int) -> dict[str, Any]:
    """``list_collections``' answer: the first ``limit`` of ``infos`` whose name holds ``match`` (case-blind), and
    when some are left out, how many (``more``) and how to reach them."""
    if match:
        infos = [info for info in infos if match.casefold() in info.name.casefold()]
    answer: dict[str, Any] = {"collections": [info.to_dict() for info in infos[:limit]]}
    if len(infos) > limit:
        which = f"{len(infos)} collections" + (f" hold {match[:60]!r}" if match else "")
        answer["more"] = len(infos) - limit
        answer["hint"] = f"{which}; the first {limit} by name are shown: pass match (part of a name) or a larger limit"
    return answer


def _reported(report: IngestReport, missing: list[str]) -> str:
    """An indexing tool's report, as an error (the tool result's ``isError``) when a document failed or a path
    does not exist, as ``rag reindex`` exits 1 then: an agent reading only the flag saw success."""
    from mcp.server.mcpserver.exceptions import ToolError

    lines = report.lines()
    if missing:
        names = ", ".join(map(repr, missing[:5]))
        lines.append(f"error: {names} {'do' if len(missing) > 1 else 'does'} not exist (any other path was indexed)")
    if missing or not report.ok:
        raise ToolError("\n".join(lines))
    return "\n".join(lines)


def unknown_tool_message(name: str, tools: list[str]) -> str:
    """One line for a call of a tool this server does not have: the nearest name, every name, and the flag
    an indexing tool needs."""
    hint = did_you_mean(name, tools, cutoff=0.5)
    flag = " (index_paths and index_text need rag mcp --allow-indexing)" if name in INDEXING_TOOLS else ""
    return f"unknown tool {name[:80]!r}; {hint}the tools are {', '.join(tools)}{flag}"


#: what each JSON-schema type of a tool's argument takes, strictly: the SDK's lax mode took "3" and true for 3
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def wrong_kind(schema: dict[str, Any], value: Any) -> str | None:
    """The JSON types a tool argument's ``schema`` allows (``anyOf`` read) when ``value`` is none of them, else None."""
    allowed = [option.get("type") for option in schema.get("anyOf", [schema])]
    if None in allowed:  # a schema this check does not read: the SDK decides
        return None
    for kind in allowed:
        python = _JSON_TYPES.get(str(kind), ())
        if isinstance(value, python) and not (isinstance(value, bool) and kind in ("integer", "number")):
            return None
    return " or ".join(str(kind) for kind in allowed)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    require_extra("mcp.server.mcpserver", extra="mcp", feature="rag mcp")
    import anyio

    from rag_service.service import build_service

    level = (args.log_level or settings.log_level).upper()
    if level not in LOG_LEVELS:
        raise ConfigurationError(f"log level {level!r} (RAG_LOG_LEVEL): use one of {', '.join(LOG_LEVELS)}")
    roots = mcp_roots.index_roots(args.allow_indexing or [])  # a DIR that is no folder: one line, before any work
    configure_logging(level)  # rag_service's lines at the chosen level, in its format, not again by the SDK's
    logging.getLogger("rag_service").propagate = False  # handler on the root logger
    service = build_service(settings)
    # load the model while the SDK is imported, and answer initialize once warm: a client calls its first
    # tool right after initialize, and that call would otherwise wait behind the model (0.7 s of 0.03)
    warming = threading.Thread(target=service.warm_up, args=(DEFAULT_CONTEXT,), name="rag-warm-up", daemon=True)
    warming.start()
    try:
        server = build_server(
            service,
            allow_indexing=args.allow_indexing is not None,
            log_level=cast(LogLevel, level),
            index_roots=roots,
        )
        warming.join(WARM_UP_WAIT_S)
        freeze_startup_objects()
        anyio.run(_serve_stdio, server)
    except KeyboardInterrupt:  # SIGINT or SIGTERM (rag_service.shutdown): a client stopping its server
        print("rag mcp: stopped", file=sys.stderr)
    except BaseExceptionGroup:
        # the stop, raised inside the event loop, can leave anyio's cancel scopes out of order as the task groups
        # unwind (the SDK's stdout writer mid-flush: "exit a cancel scope that isn't the current task's"), and
        # that error replaces it; a clean-clone run exited 1 with its traceback. After a stop it is the stop's.
        if not stop_received():
            raise
        print("rag mcp: stopped", file=sys.stderr)
    finally:
        service.close()  # ends an unfinished model export first
        # a warm-up thread still inside onnxruntime when the interpreter exits aborts the process (-6)
        warming.join(WARM_UP_WAIT_S)
    return 0


async def _serve_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, reading stdin on a daemon thread (see ``_StdinLines``)."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, given our stdin
    stdin = _StdinLines(sys.stdin.fileno())
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        stdin.reply = sender(write_stream)  # before the reader's first line: it runs at the next await
        # the SDK's messages pass through ``forward_answers``, which tells stdin's end what is still unanswered
        answers, observed = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as forwarding:
            forwarding.start_soon(forward_answers, observed, write_stream, stdin.pending)
            try:
                await lowlevel.run(read_stream, answers, lowlevel.create_initialization_options())
            finally:
                await answers.aclose()


class _StdinLines:
    """stdin's lines for the MCP transport, read on a daemon thread from a duplicate of its descriptor.

    The SDK reads stdin in a worker thread that a cancellation must wait for: a stop signal would
    hang until the client sends another line, and the interpreter waits for that thread at exit. A
    daemon thread is left behind instead, so SIGINT and SIGTERM end ``rag mcp`` at once; it reads
    with ``os.read``, holding no lock of ``sys.stdin`` that the interpreter's shutdown would need.
    """

    def __init__(self, fd: int) -> None:
        self._fd = os.dup(fd)
        self._lines: asyncio.Queue[str] | None = None
        self.reply: Reply | None = None  # answers a line the SDK would drop (``mcp_lines``)
        self.pending = PendingRequests()  # the requests the end of stdin waits for (``mcp_pending``)

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        if self._lines is None:
            self._lines = asyncio.Queue()
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._read, args=(loop, self._lines), name="rag-mcp-stdin", daemon=True).start()
        while line := await self._lines.get():
            checked = (line, None) if self.reply is None else await checked_line(line, self.reply)
            if checked is not None:
                self.pending.read(checked[1])
                return checked[0]
        await self.pending.all_answered()  # stdin ended: the SDK would cancel the calls still running
        raise StopAsyncIteration

    def _read(self, loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str]) -> None:
        pending = b""
        with contextlib.suppress(RuntimeError, OSError):  # the loop closed or stdin failed: the server is done
            while block := os.read(self._fd, 1 << 16):
                *complete, pending = (pending + block).split(b"\n")
                for raw in complete:
                    loop.call_soon_threadsafe(lines.put_nowait, raw.decode("utf-8", errors="replace") + "\n")
            if pending:
                loop.call_soon_threadsafe(lines.put_nowait, pending.decode("utf-8", errors="replace"))
            loop.call_soon_threadsafe(lines.put_nowait, "")


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rag mcp`` to the ``rag`` parser."""
    parser = commands.add_parser("mcp", help="serve search over the Model Context Protocol (stdio)")
    parser.add_argument(
        "--allow-indexing",
        nargs="*",
        metavar="DIR",
        default=None,
        help="also offer the index_paths and index_text tools; index_paths reads only inside the DIRs named "
        "(default: the working directory), never a hidden file or folder",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        type=str.upper,
        default=None,
        help="what goes to stderr (default RAG_LOG_LEVEL, else WARNING; INFO logs every request)",
    )
    parser.set_defaults(handler=_run)
