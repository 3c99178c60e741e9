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
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import ClassVar

from rag_service.errors import ChunkingError
from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.recursive import SizedChunker
from rag_service.ingest.spans import make_chunk

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(slots=True)
class JsonValue:
    """``[start, end)`` of one value; ``members`` are ``(path step, value)`` for objects and arrays."""

    start: int
    end: int
    members: list[tuple[str, JsonValue]] = field(default_factory=list)
    #: where each member starts: its key for an object's, its value for an array's
    member_starts: list[int] = field(default_factory=list)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, pos: int, what: str) -> ChunkingError:
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ChunkingError(f"not valid JSON at line {line} column {column} ({what}); fix it or use another strategy")

    def skip(self, pos: int) -> int:
        match = _WHITESPACE.match(self.text, pos)
        return match.end() if match else pos

    def value(self, pos: int, depth: int = 0) -> JsonValue:
        text = self.text
        if depth > 500:
            raise self.fail(pos, "nested more than 500 levels")
        if pos >= len(text):
            raise self.fail(pos, "a value was expected")
        char = text[pos]
        if char == '"':
            return JsonValue(pos, self.string(pos)[1])
        if char in "{[":
            return self.container(pos, depth)
        match = _SCALAR.match(text, pos)
        if not match:
            raise self.fail(pos, f"unexpected {char!r}")
        return JsonValue(pos, match.end())

    def string(self, pos: int) -> tuple[str, int]:
        try:
            value, end = scanstring(self.text, pos + 1, True)
        except json.JSONDecodeError as err:
            raise self.fail(err.pos, err.msg) from None
        return str(value), int(end)

    def container(self, start: int, depth: int) -> JsonValue:
        text = self.text
        closing = "}" if text[start] == "{" else "]"
        node = JsonValue(start, start)
        pos = self.skip(start + 1)
        if text.startswith(closing, pos):
            node.end = pos + 1
            return node
        index = 0
        while True:
            node.member_starts.append(pos)
            if closing == "}":
                if not text.startswith('"', pos):
                    raise self.fail(pos, "a quoted member name was expected")
                key, pos = self.string(pos)
                pos = self.skip(pos)
                if not text.startswith(":", pos):
                    raise self.fail(pos, "':' was expected")
                pos = self.skip(pos + 1)
                step = f".{key}" if _IDENTIFIER.fullmatch(key) else f"[{json.dumps(key, ensure_ascii=False)}]"
            else:
                step = f"[{index}]"
                index += 1
            child = self.value(pos, depth + 1)
            node.members.append((step, child))
            pos = self.skip(child.end)
            if text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif text.startswith(closing, pos):
                node.end = pos + 1
                return node
            else:
                raise self.fail(pos, f"',' or {closing!r} was expected")


def scan_json(text: str) -> list[JsonValue]:
    """The top-level values of ``text`` in order (one for JSON, one per record for JSON Lines).

    Raises ChunkingError naming the line and column of the first syntax error.
    """
    scanner = _Scanner(text)
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
        values = scan_json(text)
        spans: list[tuple[int, int, str]] = []

        def fits(start: int, end: int) -> bool:
            return self.length(text[start:end]) <= self.chunk_size

        def flush(node: JsonValue, path: str, run: list[int]) -> None:
            if len(run) == 1:
                step, child = node.members[run[0]]
                spans.append((child.start, child.end, path + step))
            elif run:
                first, last = run[0], run[-1]
                array = text[node.start] == "["
                name = f"{path}[{first}..{last}]" if array else f"{path}{node.members[first][0]} (+{len(run) - 1} more)"
                spans.append((node.member_starts[first], node.members[last][1].end, name))
            run.clear()

        def visit(node: JsonValue, path: str) -> None:
            if not node.members or fits(node.start, node.end):
                spans.append((node.start, node.end, path))
                return
            run: list[int] = []
            for index, (step, child) in enumerate(node.members):
                if not fits(node.member_starts[index], child.end):
                    flush(node, path, run)
                    visit(child, path + step)
                    continue
                if run and not fits(node.member_starts[run[0]], child.end):
                    flush(node, path, run)
                run.append(index)
            flush(node, path, run)

        line, counted = 1, 0
        for value in values:
            line, counted = line + text.count("\n", counted, value.start), value.start
            visit(value, f"line {line}: $" if len(values) > 1 else "$")
        chunks: list[TextChunk] = [
            make_chunk(text, (start, end), index=i, chunk_type=TEXT, headers={"h1": path})
            for i, (start, end, path) in enumerate(spans)
        ]
        return ChunkedDocument(chunks, {})
