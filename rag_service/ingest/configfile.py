"""The ``config`` strategy: TOML tables and YAML keys as sections, so ``[tool.mypy]`` is a header.

A TOML file's sections open at its table lines (``[tool.mypy]``, ``[[tool.mypy.overrides]]``); a YAML file's at its
top-level keys (``jobs:``), and where one key's block is longer than ``chunk_size``, at the keys one level inside it
(``jobs > test``). The comment lines right above a header belong to its section; the text before the first is a
section with the file's name alone. Headers: ``h1`` the file's name, ``h2`` the table or key, ``h3`` the nested key, so
a chunk's header path is ``pyproject.toml > tool.mypy``. Consecutive sections of one path (an array of tables) are
joined while they fit; a section longer than ``chunk_size`` is split by the recursive splitter, and ``#`` lines are
text, as ``recursive`` reads them.

The split is line-based, not parsed: ``tomllib`` and PyYAML give no character offsets for a table or a key's block
(PyYAML's marks do, but it stops at the first error), and an invalid file is still indexed, with the sections its
lines show. Which syntax: the suffix (``.toml``; ``.yaml``/``.yml``), else TOML when a table line is found.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any, ClassVar

from rag_service.ingest.chunk import TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.garbage import DocumentLines, empty_counts, filter_spans
from rag_service.ingest.recursive import SizedChunker, recursive_spans
from rag_service.ingest.spans import make_chunk, trim_span

#: a TOML key part: bare, or quoted
_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
#: a TOML table line, ``[a.b]`` or ``[[a.b]]``, with an optional comment; group 1 is the name
_TABLE = re.compile(rf"^[ \t]*\[\[?[ \t]*({_KEY}(?:[ \t]*\.[ \t]*{_KEY})*)[ \t]*\]\]?[ \t]*(?:#.*)?$")
#: a YAML mapping key that opens a line (after its indentation): plain or quoted, then ``:`` and a blank or the end
_YAML_KEY = re.compile(r"""^([ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s#:\-?'"!&*|>%@`{}\[\],][^:#\n]*?)[ \t]*:(?=[ \t]|$)""")
_COMMENT = re.compile(r"^[ \t]*#")
TOML_SUFFIXES = (".toml",)
YAML_SUFFIXES = (".yaml", ".yml")

#: ``(start, headers)`` of one section's first character; a section runs to the next one's start
Opening = tuple[int, dict[str, str]]


def _lines(text: str) -> list[tuple[int, str]]:
    """Each line of ``text`` with its start offset (without its ``\\n``)."""
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


def _with_comments(lines: list[tuple[int, str]], index: int) -> int:
    """The start of line ``index`` moved up over the comment lines right above it."""
    while index > 0 and _COMMENT.match(lines[index - 1][1]):
        index -= 1
    return lines[index][0]


def _unquoted(key: str) -> str:
    return key[1:-1] if len(key) > 1 and key[0] in "\"'" and key[-1] == key[0] else key


def _table_name(key: str) -> str:
    """A TOML table name as a header: its parts' quotes and the spaces around its dots dropped."""
    return ".".join(_unquoted(part) for part in re.findall(_KEY, key))


def toml_openings(text: str) -> list[Opening]:
    """Where each TOML table (``[a.b]``, ``[[a.b]]``) opens, outside multi-line strings."""
    lines = _lines(text)
    openings: list[Opening] = []
    quote: str | None = None  # the multi-line string a line is inside of
    for i, (_, line) in enumerate(lines):
        if quote is None and (found := _TABLE.match(line)) is not None:
            openings.append((_with_comments(lines, i), {"h2": _table_name(found[1])}))
        for delimiter in re.findall(r'"""|\'\'\'', line):
            quote = delimiter if quote is None else None if delimiter == quote else quote
    return openings


def yaml_openings(text: str, *, too_long: Any) -> list[Opening]:
    """Where each top-level YAML key opens, and the keys one level inside a block ``too_long(start, end)`` says is
    too long; ``---`` document markers, lists and indented text never open one."""
    lines = _lines(text)
    tops = [(i, _unquoted(m[2])) for i, (_, line) in enumerate(lines) if (m := _YAML_KEY.match(line)) and not m[1]]
    openings: list[Opening] = []
    for n, (i, key) in enumerate(tops):
        stop = tops[n + 1][0] if n + 1 < len(tops) else len(lines)
        openings.append((_with_comments(lines, i), {"h2": key}))
        end = lines[stop][0] if stop < len(lines) else len(text)
        if not too_long(lines[i][0], end):
            continue
        block = [line for _, line in lines[i + 1 : stop] if line.strip() and not _COMMENT.match(line)]
        depth = min((len(line) - len(line.lstrip(" \t")) for line in block), default=0)  # its entries' indentation
        for j, (_, line) in enumerate(lines[i + 1 : stop], start=i + 1):
            if depth and (found := _YAML_KEY.match(line)) is not None and len(found[1]) == depth:
                start = _with_comments(lines, j)
                if openings[-1][1] == {"h2": key} and not text[openings[-1][0] : start].strip().count("\n"):
                    start = openings.pop()[0]  # the key's own line alone (``jobs:``) opens its first entry
                openings.append((start, {"h2": key, "h3": _unquoted(found[2])}))
    return openings


class ConfigChunker(SizedChunker):
    """Chunker for the ``config`` strategy (``TEXT`` chunks); ``source`` names the file (``h1``) and its syntax."""

    strategy: ClassVar[str] = "config"

    def __init__(self, *, source: str = "", **sizes: Any) -> None:
        super().__init__(**sizes)
        self.name = PurePath(source).name if source else ""
        self.suffix = PurePath(source).suffix.lower() if source else ""

    def sections(self, text: str) -> list[tuple[int, int, dict[str, str]]]:
        """``(start, end, headers)`` of each section in order, the text before the first included."""
        if self.suffix in YAML_SUFFIXES:
            openings = self._yaml(text)
        else:
            openings = toml_openings(text)
            if not openings and self.suffix not in TOML_SUFFIXES:
                openings = self._yaml(text)
        base = {"h1": self.name} if self.name else {}
        starts = sorted({start: headers for start, headers in openings}.items())
        if not starts or starts[0][0] > 0:
            starts.insert(0, (0, {}))
        ends = [start for start, _ in starts[1:]] + [len(text)]
        return [(start, end, {**base, **h}) for (start, h), end in zip(starts, ends, strict=True)]

    def _yaml(self, text: str) -> list[Opening]:
        return yaml_openings(text, too_long=lambda start, end: self.length(text[start:end]) > self.chunk_size)

    def split(self, text: str) -> ChunkedDocument:
        """Split ``text`` into its sections (see the module doc) with exact offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        groups: list[tuple[int, int, dict[str, str]]] = []
        for start, end, headers in self.sections(text):
            if groups and self.length(text[groups[-1][0] : end]) <= self.chunk_size:
                last_start, last_end, last = groups[-1]
                if last == headers or len(text[last_start:last_end].strip()) < self.min_chunk_chars:
                    # ``[[array]]`` tables of one name, or a short section and the next: one chunk, their shared headers
                    groups[-1] = (last_start, end, {k: v for k, v in headers.items() if last.get(k) == v})
                    continue
            groups.append((start, end, headers))
        lines = DocumentLines(text, markdown=False)  # ``# ...`` is a comment: text
        counts = empty_counts()
        chunks: list[TextChunk] = []
        for start, end, headers in groups:
            span = trim_span(text, start, end)
            if span is None:
                continue
            pieces = [span]
            if self.length(text[span[0] : span[1]]) > self.chunk_size:
                pieces = recursive_spans(
                    text, *span, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, length=self.length
                )
            for piece in filter_spans(lines, pieces, min_chunk_chars=self.min_chunk_chars, counts=counts):
                chunks.append(make_chunk(text, piece, index=len(chunks), chunk_type=TEXT, headers=headers))
        return ChunkedDocument(chunks, counts)
