"""The ``json`` strategy: every chunk is one JSON value of the document, or a run of members of one, with its path.

The text is scanned once into a tree of value spans (the standard library's decoder gives no offsets;
LangChain's ``RecursiveJsonSplitter`` builds new JSON objects, which are not slices of the stored
text). A value that fits ``chunk_size`` is one chunk; a larger object or array is replaced by its
members, recursively, where consecutive members that fit together are one chunk (a vector of 300
numbers was 300 one-number chunks): ``$.vector[0..86]`` for array items, ``$.model (+2 more)`` for the
first of an object's members (keys included, as written). A scalar longer than ``chunk_size`` is one long
chunk. A one-value chunk parses as JSON; a run does inside its container's brackets; ``headers["h1"]`` is
the path (``$.servers[2].host``).
JSON Lines (several values one after another) are scanned value by value; their paths start with
the line number: ``line 3: $.user.name``. There is no overlap and no garbage filter: every value is data.
Objects and arrays nest at most ``MAX_JSON_DEPTH`` (500) levels deep; NaN and Infinity are read, as Python's
``json`` reads them.
"""

from __future__ import annotations

import gc
import json
import re
import threading
from array import array
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import ClassVar

from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.recursive import SizedChunker
from rag_service.ingest.spans import make_chunk

_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: Python's ``json`` reads NaN, Infinity and -Infinity too, and so the loader's check lets them through
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")
_DEPTH_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # strings skipped whole: their brackets are text
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: objects and arrays nested deeper than this are refused (by the loader too), with a message of their own
MAX_JSON_DEPTH = 500


@dataclass(slots=True)
class JsonValue:
    """``[start, end)`` of one value and, for an object or array too large to be one chunk, its members: where each
    one's value starts and ends, the values that are such containers themselves (None for every other value), and
    an object's keys: where each starts and its path step.

    Members are offsets in arrays, not objects (a value of two characters cost ~400 bytes as an object); a
    container that fits is kept as its span alone, since nothing descends into it.
    """

    start: int
    end: int
    #: where each of an object's members starts (its key); an array's start where their values do
    key_starts: array[int] = field(default_factory=lambda: array("q"))
    value_starts: array[int] = field(default_factory=lambda: array("q"))
    value_ends: array[int] = field(default_factory=lambda: array("q"))
    children: list[JsonValue | None] = field(default_factory=list)
    #: an object's path steps (``.name``, ``["a b"]``); None for an array, whose steps are the indexes
    keys: list[str] | None = None

    def step(self, index: int) -> str:
        """The path step of member ``index``."""
        return self.keys[index] if self.keys is not None else f"[{index}]"

    def member_start(self, index: int) -> int:
        """Where member ``index`` starts: its key for an object's, its value for an array's."""
        return self.key_starts[index] if self.keys is not None else self.value_starts[index]


class _Scanner:
    def __init__(self, text: str, *, leaf_size: int) -> None:
        self.text = text
        self.leaf_size = leaf_size  # a container of at most this many characters is kept as its span

    def fail(self, pos: int, what: str) -> ChunkingError:
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ChunkingError(f"not valid JSON at line {line} column {column} ({what}); fix it or use another strategy")

    def skip(self, pos: int) -> int:
        match = _WHITESPACE.match(self.text, pos)
        return match.end() if match else pos

    def value(self, pos: int) -> JsonValue:
        """The value at ``pos`` and all it holds, scanned without recursion: nesting costs no stack, and deeper
        than ``MAX_JSON_DEPTH`` objects and arrays is refused with its own message."""
        text = self.text
        open_: list[tuple[JsonValue, str]] = []  # containers entered, and each one's closing character
        while True:
            if pos >= len(text):
                raise self.fail(pos, "a value was expected")
            char, start, node = text[pos], pos, None
            if char in "{[":
                if len(open_) >= MAX_JSON_DEPTH:
                    raise ChunkingError(f"{_depth_problem(text, pos)}; flatten it or use another strategy")
                closing = "}" if char == "{" else "]"
                pos = self.skip(pos + 1)
                if not text.startswith(closing, pos):
                    open_.append((JsonValue(start, start, keys=[] if char == "{" else None), closing))
                    pos = self.member(open_, pos)
                    continue
                end = pos + 1  # an empty container: its span
            elif char == '"':
                end = self.string(pos)[1]
            elif match := _SCALAR.match(text, pos):
                end = match.end()
            else:
                raise self.fail(pos, f"unexpected {char!r}")
            while open_:  # hand the value to its container, closing every container it ends
                parent, closing = open_[-1]
                parent.value_starts.append(start)
                parent.value_ends.append(end)
                parent.children.append(node)
                pos = self.skip(end)
                if text.startswith(",", pos):
                    pos = self.member(open_, self.skip(pos + 1))
                    break
                if not text.startswith(closing, pos):
                    raise self.fail(pos, f"',' or {closing!r} was expected")
                parent.end = pos + 1
                open_.pop()
                start, end = parent.start, parent.end
                node = parent if end - start > self.leaf_size else None
            else:
                return node if node is not None else JsonValue(start, end)

    def member(self, open_: list[tuple[JsonValue, str]], pos: int) -> int:
        """Past the next member's name (of an object) to its value; its path step recorded in ``open_[-1]``."""
        text = self.text
        node = open_[-1][0]
        if node.keys is None:
            return pos
        node.key_starts.append(pos)
        if not text.startswith('"', pos):
            raise self.fail(pos, "a quoted member name was expected")
        key, pos = self.string(pos)
        pos = self.skip(pos)
        if not text.startswith(":", pos):
            raise self.fail(pos, "':' was expected")
        node.keys.append(f".{key}" if _IDENTIFIER.fullmatch(key) else f"[{json.dumps(key, ensure_ascii=False)}]")
        return self.skip(pos + 1)

    def string(self, pos: int) -> tuple[str, int]:
        try:
            value, end = scanstring(self.text, pos + 1, True)
        except json.JSONDecodeError as err:
            raise self.fail(err.pos, err.msg) from None
        return str(value), int(end)


def _depth_problem(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"JSON nested more than {MAX_JSON_DEPTH} levels deep (line {line} column {column})"


def depth_problem(text: str) -> str | None:
    """For JSON already known to parse: where it nests objects and arrays more than ``MAX_JSON_DEPTH`` deep
    (``"JSON nested more than 500 levels deep (line 1 column 501)"``), else None."""
    depth = 0
    for token in _DEPTH_TOKENS.finditer(text):
        char = token[0]
        if char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return _depth_problem(text, token.start())
        elif char in "]}":
            depth -= 1
    return None


def scan_json(text: str, *, leaf_size: int = 0) -> list[JsonValue]:
    """The top-level values of ``text`` in order (one for JSON, one per record for JSON Lines); containers of at
    most ``leaf_size`` characters inside them are kept as spans, without their members.

    Raises ChunkingError naming the line and column of the first syntax error.
    """
    scanner = _Scanner(text, leaf_size=leaf_size)
    values: list[JsonValue] = []
    pos = scanner.skip(0)
    while pos < len(text):
        value = scanner.value(pos)
        values.append(value)
        pos = scanner.skip(value.end)
    return values


class JsonChunker(SizedChunker):
    """Chunker for the ``json`` strategy (``TEXT`` chunks, each valid JSON, path in ``h1``)."""

    strategy: ClassVar[str] = "json"

    def split(self, text: str) -> ChunkedDocument:
        """Chunk every value that fits, descending into those that do not; exact offsets."""
        if not text.strip():
            return ChunkedDocument([], {})
        # the value tree has no cycles, so the collector finds nothing in it; left running, it traversed the growing
        # tree again and again (4 MB of arrays nested 400 deep: 17 s, 3.4 s without it)
        _pause_collector()  # a call, not a context manager: its generator would be an allocation before the pause
        try:
            return self._split(text)
        finally:
            _resume_collector()

    def _split(self, text: str) -> ChunkedDocument:
        values = scan_json(text, leaf_size=self.chunk_size if self.length is len else 0)
        spans: list[tuple[int, int, str]] = []

        def fits(start: int, end: int) -> bool:  # in characters without a slice: one per level cost O(depth x size)
            return (
                end - start <= self.chunk_size
                if self.length is len
                else self.length(text[start:end]) <= self.chunk_size
            )

        def parts(node: JsonValue, path: str) -> list[tuple[JsonValue | None, int, int, str]]:
            """A too-large container's parts in order: runs of members that fit together as spans (node None),
            and each member too large for any run as a node to descend into (None when it holds no members)."""
            found: list[tuple[JsonValue | None, int, int, str]] = []
            run: list[int] = []

            def flush() -> None:
                if len(run) == 1:
                    found.append((None, node.value_starts[run[0]], node.value_ends[run[0]], path + node.step(run[0])))
                elif run:
                    first, last = run[0], run[-1]
                    more = f"{path}{node.step(first)} (+{len(run) - 1} more)"
                    name = f"{path}[{first}..{last}]" if node.keys is None else more
                    found.append((None, node.member_start(first), node.value_ends[last], name))
                run.clear()

            for index, end in enumerate(node.value_ends):
                if not fits(node.member_start(index), end):
                    flush()
                    found.append((node.children[index], node.value_starts[index], end, path + node.step(index)))
                    continue
                if run and not fits(node.member_start(run[0]), end):
                    flush()
                run.append(index)
            flush()
            return found

        def visit(value: JsonValue, root: str) -> None:  # depth first, in order, on a list: no stack per level
            todo: list[tuple[JsonValue | None, int, int, str]] = [(value, value.start, value.end, root)]
            while todo:
                node, start, end, path = todo.pop()
                if node is None or not node.value_ends or fits(start, end):
                    spans.append((start, end, path))
                else:
                    todo.extend(reversed(parts(node, path)))

        line, counted = 1, 0
        for value in values:
            line, counted = line + text.count("\n", counted, value.start), value.start
            visit(value, f"line {line}: $" if len(values) > 1 else "$")
        chunks: list[TextChunk] = [
            make_chunk(text, (start, end), index=i, chunk_type=TEXT, headers={"h1": path})
            for i, (start, end, path) in enumerate(spans)
        ]
        return ChunkedDocument(chunks, {})


_pauses = 0  # splits running with the collector paused (threads of rag serve split at once)
_pauses_lock = threading.Lock()
_resume = False  # whether the collector ran before the first of them


def _pause_collector() -> None:
    """The cyclic collector off while any split runs, back as it was after the last (``_resume_collector``):
    ``gc`` is the process's, so one split must not turn it on under another (nor leave it off)."""
    global _pauses, _resume
    with _pauses_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1


def _resume_collector() -> None:
    """The end of a split's pause (``_pause_collector``)."""
    global _pauses
    with _pauses_lock:
        _pauses -= 1
        if _pauses == 0 and _resume:
            gc.enable()
