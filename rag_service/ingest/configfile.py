"""The ``config`` strategy: TOML tables and YAML keys as sections, so ``[tool.mypy]`` is a header.

A TOML file's sections open at its table lines (``[tool.mypy]``, ``[[tool.mypy.overrides]]``); a YAML file's at its
top-level keys (``jobs:``), and where one key's block is longer than ``chunk_size``, at the keys one level inside it
(``jobs > test``). A YAML file of several documents (``---``) is a section per document, named by its ``kind`` and
``metadata.name`` (a Kubernetes manifest: ``Deployment web``) or its number (``document 2``), and split at its keys
only where it is longer than ``chunk_size`` (``k8s.yaml > Deployment web > spec``). The comment lines right above a
header belong to its section; the text before the first is a section with the file's name alone. Headers: ``h1`` the
file's name, then the document, the table or key and the nested key, so a chunk's header path is
``pyproject.toml > tool.mypy``. A YAML file (or document) whose top level is a list (an Ansible playbook) is a section
per item, named by its ``name`` (else ``id``, ``key``, ``title``; else ``item 2``) and split at its keys where it is
long (``site.yml > Install web > tasks``); a lone unnamed item is no level of its own. An ``[[array]]`` table is
named by its ``name`` key (``Cargo.toml > bin cli``), else by its place (``bin (2)``). Consecutive tables or items of
one array are joined while they fit, as is a section shorter than ``min_chunk_chars`` with the next; a joined chunk
names its parts where their headers part (``values.yaml > image, service``: ``merged_headers``).

A section longer than ``chunk_size`` is cut between its entries (keys, list items: a workflow's steps), those of
the shallowest indentation first, joined while they fit; an entry still too long is cut between its own, and one
with none (a long string) by the recursive splitter. Nothing inside a value opens a section or is cut between
entries: a multi-line string, a block scalar (``run: |``), an open bracket (``configlines``). A chunk keeps its
first line's indentation (YAML's structure is its indentation) and drops the bare ``---`` at its edges; ``#`` lines
are text, as ``recursive`` reads them.

An INI file (``.ini``, ``.cfg``: ``setup.cfg``, ``tox.ini``) is read as TOML's tables are, its section lines
(``[testenv:py311]``) the headers, its unindented key lines the entries (an indented line continues a value).

The split is line-based, not parsed: ``tomllib`` and PyYAML give no character offsets for a table or a key's block
(PyYAML's marks do, but it stops at the first error), and an invalid file is still indexed, with the sections its
lines show. Which syntax: the suffix (``.toml``; ``.yaml``/``.yml``; ``.ini``/``.cfg``), else TOML when a table line
is found, else YAML.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import Any, ClassVar

from rag_service.ingest.chunk import HEADER_KEYS, TEXT, ChunkedDocument, TextChunk
from rag_service.ingest.configlines import YAML_KEY, Line, ini_lines, toml_lines, unquoted, yaml_lines
from rag_service.ingest.garbage import DocumentLines, empty_counts, filter_spans
from rag_service.ingest.recursive import SizedChunker, recursive_spans
from rag_service.ingest.spans import Span, make_chunk, trim_span

TOML_SUFFIXES = (".toml",)
YAML_SUFFIXES = (".yaml", ".yml")
INI_SUFFIXES = (".ini", ".cfg")
#: a document's name is cut to this many characters
_NAME_CHARS = 80

#: ``(start, headers, kin)`` of one section's first character; a section runs to the next one's start. ``kin``: the
#: array a TOML ``[[array]]`` table or a whole YAML list item belongs to (``bin``, ``-``), else ``""``: sections of one
#: kin are joined while they fit
Opening = tuple[int, dict[str, str], str]
#: whether ``text[start:end]`` is longer than ``chunk_size``
TooLong = Callable[[int, int], bool]


def _with_comments(lines: Sequence[Line], index: int, floor: int = 0) -> int:
    """The start of line ``index`` moved up over the comment lines right above it (not above line ``floor``)."""
    while index > floor and lines[index - 1].comment:
        index -= 1
    return lines[index].start


def _end(lines: Sequence[Line], stop: int, text: str) -> int:
    return lines[stop].start if stop < len(lines) else len(text)


def toml_openings(lines: Sequence[Line]) -> list[Opening]:
    """Where each TOML table (``[a.b]``, ``[[a.b]]``) opens, outside strings and arrays; an array's table is named by
    its ``name`` key (``bin cli``), else by its place in the array (``bin (2)``)."""
    tables = [i for i, line in enumerate(lines) if line.table]
    names: list[str] = []
    places: dict[str, int] = {}
    for n, i in enumerate(tables):
        name = lines[i].key or ""
        if lines[i].text.lstrip().startswith("[["):
            places[name] = places.get(name, 0) + 1
            stop = tables[n + 1] if n + 1 < len(tables) else len(lines)
            own = next((_value(line, "=") for line in lines[i + 1 : stop] if _toml_key(line) == "name"), "")
            name = f"{name} {own[:_NAME_CHARS]}" if own else name if places[name] == 1 else f"{name} ({places[name]})"
        names.append(name)
    return [
        (
            _with_comments(lines, i),
            {"h2": name},
            (lines[i].key or "") if lines[i].text.lstrip().startswith("[[") else "",
        )
        for i, name in zip(tables, numbered(names), strict=True)
    ]


def _toml_key(line: Line) -> str | None:
    """The bare key a TOML key line sets (``name = ...``), else None."""
    found = re.match(r"[ \t]*([A-Za-z0-9_-]+|\"[^\"\n]*\")[ \t]*=", line.text) if line.entry else None
    return unquoted(found[1]) if found is not None else None


def numbered(names: Sequence[str]) -> list[str]:
    """``names`` with each repeat told apart by its count: ``web``, ``web (2)``."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out


def _documents(lines: Sequence[Line]) -> list[tuple[int, int]]:
    """``(first, stop)`` line ranges of a YAML text's documents that hold anything but comments, each from its
    ``---`` marker (moved up over the comments right above it)."""
    bounds = [i for i, line in enumerate(lines) if line.marker and line.text.startswith("---")]
    starts = [0, *bounds] if not bounds or bounds[0] > 0 else bounds
    documents = []
    for n, first in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        if any(line.entry or (not line.blank and not line.comment and not line.marker) for line in lines[first:stop]):
            documents.append((first, stop))
    return documents


def _value(line: Line, sign: str = ":") -> str:
    """A key line's plain value (after ``sign``), without a comment or quotes."""
    value = line.text.split(sign, 1)[1] if sign in line.text else ""
    return unquoted(re.sub(r"(^|[ \t])#.*$", "", value).strip())


def _document_name(lines: Sequence[Line], first: int, stop: int, number: int) -> str:
    """``kind`` and ``metadata.name`` (or a top-level ``name``) of a YAML document, else ``document <number>``."""
    kind = name = ""
    in_metadata = False
    for line in lines[first:stop]:
        if not line.entry:
            continue
        if line.indent == 0:
            in_metadata = line.key == "metadata"
            kind = kind or (_value(line) if line.key == "kind" else "")
            name = name or (_value(line) if line.key == "name" else "")
        elif in_metadata and line.key == "name" and not name:
            name = _value(line)
    return " ".join(part for part in (kind, name) if part)[:_NAME_CHARS] or f"document {number}"


def _item_key(line: Line) -> tuple[int, str | None]:
    """The column of a YAML list item's own text (after its dashes) and the key it opens there, if any."""
    column = len(line.text) - len(re.sub(r"^[ \t]*(?:-(?:[ \t]+|$))+", "", line.text))
    found = YAML_KEY.match(line.text[column:])
    return column, (unquoted(found[2]) if found is not None else None)


def _item_name(lines: Sequence[Line], first: int, stop: int, number: int) -> str:
    """A YAML list item's ``name`` (else ``id``, ``key``, ``title``) when a plain scalar, else ``item <number>``."""
    column, own = _item_key(lines[first])
    keys = {own: lines[first]} if own is not None else {}
    for line in lines[first + 1 : stop]:
        if line.key is not None and line.indent == column:
            keys.setdefault(line.key, line)
    for key in ("name", "id", "key", "title"):
        value = _value(keys[key]) if key in keys else ""
        if value and value[0] not in "|>[{&*!":
            return value[:_NAME_CHARS]
    return f"item {number}"


def _body_openings(
    lines: Sequence[Line], first: int, stop: int, text: str, base: dict[str, str], level: int, too_long: TooLong
) -> list[Opening]:
    """The openings of a YAML document's lines ``first..stop``: its list items (``h<level>``) when it is a list,
    else its keys (``_key_openings``)."""
    items = [i for i in range(first, stop) if lines[i].entry and lines[i].indent == 0]
    levels = (f"h{level}", f"h{level + 1}")
    if not items or not lines[items[0]].item:
        tops = [i for i in items if lines[i].key is not None]
        return _key_openings(lines, first, tops, stop, text, base, levels, too_long)
    items = [i for i in items if lines[i].item]
    blocks = list(zip(items, [*items[1:], stop], strict=True))
    names = numbered([_item_name(lines, i, end, n) for n, (i, end) in enumerate(blocks, start=1)])
    openings: list[Opening] = []
    for (i, end), name in zip(blocks, names, strict=True):
        column, own = _item_key(lines[i])
        tops = [i] * (own is not None) + [j for j in range(i + 1, end) if lines[j].key and lines[j].indent == column]
        if names == ["item 1"]:  # one item, unnamed: its keys are the file's sections, as one document's are
            return _key_openings(lines, first, tops, stop, text, base, levels, too_long)
        start = _with_comments(lines, i, first)
        if not too_long(start, _end(lines, end, text)):
            openings.append((start, {**base, levels[0]: name}, "-"))
            continue
        keys = _key_openings(
            lines, first, tops, end, text, {**base, levels[0]: name}, (*levels[1:], f"h{level + 2}"), too_long
        )
        openings += keys if keys and keys[0][0] <= start else [(start, {**base, levels[0]: name}, ""), *keys]
    return openings


def _key_openings(
    lines: Sequence[Line],
    first: int,
    tops: Sequence[int],
    stop: int,
    text: str,
    base: dict[str, str],
    levels: tuple[str, str],
    too_long: TooLong,
) -> list[Opening]:
    """Where each key on the lines ``tops`` opens (``levels[0]``), up to ``stop`` and never above line ``first``, and
    the keys one level inside a block ``too_long`` says is too long (``levels[1]``)."""
    openings: list[Opening] = []
    for n, i in enumerate(tops):
        block_stop = tops[n + 1] if n + 1 < len(tops) else stop
        key = lines[i].key or _item_key(lines[i])[1] or ""
        openings.append((_with_comments(lines, i, first), {**base, levels[0]: key}, ""))
        if not too_long(lines[i].start, _end(lines, block_stop, text)):
            continue
        entries = [j for j in range(i + 1, block_stop) if lines[j].entry]
        depth = min((lines[j].indent for j in entries), default=0)  # its entries' indentation
        for j in entries:
            if not depth or lines[j].indent != depth or lines[j].key is None:
                continue
            start = _with_comments(lines, j, i + 1)
            if openings[-1][1] == {**base, levels[0]: key} and not text[openings[-1][0] : start].strip().count("\n"):
                start = openings.pop()[0]  # the key's own line alone (``jobs:``) opens its first entry
            openings.append((start, {**base, levels[0]: key, levels[1]: lines[j].key or ""}, ""))
    return openings


def yaml_openings(lines: Sequence[Line], text: str, *, too_long: TooLong) -> list[Opening]:
    """Where each YAML document (of several), top-level key and, in a block ``too_long(start, end)`` says is too
    long, key one level inside opens; lists and text inside a value never open one."""
    documents = _documents(lines)
    if len(documents) < 2:
        return _body_openings(lines, 0, len(lines), text, {}, 2, too_long)
    openings: list[Opening] = []
    names = numbered([_document_name(lines, first, stop, n) for n, (first, stop) in enumerate(documents, start=1)])
    for (first, stop), name in zip(documents, names, strict=True):
        start = _with_comments(lines, first)
        base = {"h2": name}  # two documents of a name stay apart: ``ConfigMap settings (2)``
        openings.append((start, base, ""))
        if too_long(start, _end(lines, stop, text)):
            keys = _body_openings(lines, first, stop, text, base, 3, too_long)
            if keys and keys[0][0] <= start:
                openings.pop()  # the document's first key opens at its start
            openings += keys
    return openings


def entry_spans(
    lines: Sequence[Line],
    start: int,
    end: int,
    *,
    too_long: TooLong,
    fallback: Callable[[int, int], list[Span]],
    offsets: Sequence[int] | None = None,
) -> list[Span]:
    """``[start, end)`` cut before its entries (``_cut``), then neighbouring pieces joined while they fit.
    ``offsets``: the lines' starts (computed when not given)."""
    offsets = [line.start for line in lines] if offsets is None else offsets
    joined: list[Span] = []
    for lo, hi in _cut(lines, offsets, start, end, too_long=too_long, fallback=fallback):
        if joined and joined[-1][1] == lo and not too_long(joined[-1][0], hi):
            joined[-1] = (joined[-1][0], hi)
        else:
            joined.append((lo, hi))
    return joined


def _cut(
    lines: Sequence[Line],
    offsets: Sequence[int],
    start: int,
    end: int,
    *,
    too_long: TooLong,
    fallback: Callable[[int, int], list[Span]],
) -> list[Span]:
    """``[start, end)`` cut before its entries of the shallowest indentation that leaves more than the lines that
    open them before the first cut (``spec:`` alone), the pieces joined while they fit; a piece still too long is
    cut so in turn, and one without such entries by ``fallback``."""
    first, last = bisect_right(offsets, start) - 1, bisect_right(offsets, max(end - 1, start)) - 1
    inner = [i for i in range(first + 1, last + 1) if lines[i].entry]
    cuts: list[int] = []
    for level in sorted({lines[i].indent for i in inner}):
        at = [i for i in inner if lines[i].indent == level]
        if all(lines[j].opener or lines[j].blank or lines[j].comment for j in range(first, at[0])):
            at = at[1:]  # the first piece would be only the keys that open it
        if at:
            cuts = sorted({_with_comments(lines, i, first + 1) for i in at} - {start})
            break
    if not cuts:
        return fallback(start, end)
    pieces: list[Span] = []
    for lo, hi in zip([start, *cuts], [*cuts, end], strict=True):
        if pieces and not too_long(pieces[-1][0], hi):
            pieces[-1] = (pieces[-1][0], hi)
        else:
            pieces.append((lo, hi))
    out: list[Span] = []
    for lo, hi in pieces:
        if too_long(lo, hi):
            out += _cut(lines, offsets, lo, hi, too_long=too_long, fallback=fallback)
        else:
            out.append((lo, hi))
    return out


def merged_headers(first: dict[str, str], second: dict[str, str]) -> dict[str, str]:
    """The headers of two neighbouring sections joined: those they share, then, at the first level where they
    differ, both names (``image, service``; a numbered copy of a listed name, ``bin (2)``, adds none), cut at
    ``_NAME_CHARS`` with ``…``; deeper levels are dropped. A section with no name there (the text before the first
    key) names nothing: the other's headers are kept whole."""
    out: dict[str, str] = {}
    for key in HEADER_KEYS:
        a, b = first.get(key), second.get(key)
        if a == b and a is not None:
            out[key] = a
            continue
        if a is None or b is None:
            rest = second if a is None else first
            return {**out, **{k: v for k, v in rest.items() if HEADER_KEYS.index(k) >= HEADER_KEYS.index(key)}}
        names = a.split(", ")
        copy = re.fullmatch(r"(.*) \(\d+\)", b)
        if b not in names and (copy is None or copy[1] not in names) and not a.endswith("…"):
            a = f"{a}, {b}" if len(a) + len(b) + 2 <= _NAME_CHARS else f"{a}, …"
        out[key] = a
        break
    return out


def shown_span(text: str, start: int, end: int) -> Span | None:
    """``(start, end)`` trimmed of blank lines, whitespace and bare ``---`` lines at its edges, its first line's
    indentation kept; None when nothing else is left."""
    span = trim_span(text, start, end)
    while span is not None:
        first_end = text.find("\n", span[0], span[1])
        last_start = text.rfind("\n", span[0], span[1]) + 1
        if _bare_marker(text[span[0] : first_end if first_end >= 0 else span[1]]):
            span = None if first_end < 0 else trim_span(text, first_end, span[1])
        elif last_start > span[0] and _bare_marker(text[last_start : span[1]]):
            span = trim_span(text, span[0], last_start)
        else:
            break
    if span is None:
        return None
    line = text.rfind("\n", 0, span[0]) + 1  # a section starts on a line's start: never before the document
    return (line if not text[line : span[0]].strip(" \t") else span[0]), span[1]


def _bare_marker(line: str) -> bool:
    return re.fullmatch(r"(?:---|\.\.\.)[ \t]*(?:#.*)?", line.strip()) is not None


class ConfigChunker(SizedChunker):
    """Chunker for the ``config`` strategy (``TEXT`` chunks); ``source`` names the file (``h1``) and its syntax."""

    strategy: ClassVar[str] = "config"

    def __init__(self, *, source: str = "", **sizes: Any) -> None:
        super().__init__(**sizes)
        self.name = PurePath(source).name if source else ""
        self.suffix = PurePath(source).suffix.lower() if source else ""

    def lines(self, text: str) -> list[Line]:
        """The lines of ``text`` as its syntax reads them: YAML or INI by its suffix, TOML by its suffix or its table
        lines, else YAML."""
        if self.suffix in YAML_SUFFIXES:
            return yaml_lines(text)
        if self.suffix in INI_SUFFIXES:
            return ini_lines(text)
        lines = toml_lines(text)
        return lines if self.suffix in TOML_SUFFIXES or any(line.table for line in lines) else yaml_lines(text)

    def sections(self, text: str, lines: Sequence[Line] | None = None) -> list[tuple[int, int, dict[str, str]]]:
        """``(start, end, headers)`` of each section in order, the text before the first included."""
        return [(start, end, headers) for start, end, headers, _ in self._sections(text, lines)]

    def _sections(self, text: str, lines: Sequence[Line] | None = None) -> list[tuple[int, int, dict[str, str], str]]:
        """``sections`` with each one's kin (see ``Opening``)."""
        lines = self.lines(text) if lines is None else lines
        if self.suffix in (*TOML_SUFFIXES, *INI_SUFFIXES) or any(line.table for line in lines):
            openings = toml_openings(lines)
        else:
            openings = yaml_openings(lines, text, too_long=self._too_long(text))
        base = {"h1": self.name} if self.name else {}
        starts = sorted({start: (headers, kin) for start, headers, kin in openings}.items())
        if not starts or starts[0][0] > 0:
            starts.insert(0, (0, ({}, "")))
        ends = [start for start, _ in starts[1:]] + [len(text)]
        return [(start, end, {**base, **h}, kin) for (start, (h, kin)), end in zip(starts, ends, strict=True)]

    def _too_long(self, text: str) -> TooLong:
        return lambda start, end: self.length(text[start:end]) > self.chunk_size

    def _shown(self, text: str, start: int, end: int) -> Span | None:
        """``shown_span``, without the first line's indentation where it would not fit ``chunk_size`` (a piece the
        recursive fallback cut to the size: 13 characters shown of a size of 12)."""
        span = shown_span(text, start, end)
        if span is not None and text[span[0]] in " \t" and self.length(text[span[0] : span[1]]) > self.chunk_size:
            return trim_span(text, *span)
        return span

    def split(self, text: str) -> ChunkedDocument:
        """Split ``text`` into its sections (see the module doc) with exact offsets; drop garbage pieces."""
        if not text.strip():
            return ChunkedDocument([], {})
        lines = self.lines(text)
        too_long = self._too_long(text)
        groups: list[tuple[int, int, dict[str, str], str]] = []
        for start, end, headers, kin in self._sections(text, lines):
            if groups and not too_long(groups[-1][0], end):
                last_start, last_end, last, last_kin = groups[-1]
                if (kin and kin == last_kin) or len(text[last_start:last_end].strip()) < self.min_chunk_chars:
                    # ``[[array]]`` tables or list items of one array, or a short section and the next: one chunk
                    groups[-1] = (last_start, end, merged_headers(last, headers), kin if kin == last_kin else "")
                    continue
            groups.append((start, end, headers, kin))

        def fallback(start: int, end: int) -> list[Span]:
            return recursive_spans(
                text, start, end, chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, length=self.length
            )

        offsets = [line.start for line in lines]
        document = DocumentLines(text, syntax="plain")  # ``# ...`` is a comment: text
        counts = empty_counts()
        chunks: list[TextChunk] = []
        for start, end, headers, _ in groups:
            pieces = [(start, end)]
            if too_long(start, end):
                pieces = entry_spans(lines, start, end, too_long=too_long, fallback=fallback, offsets=offsets)
            spans = [span for lo, hi in pieces if (span := self._shown(text, lo, hi)) is not None]
            for piece in filter_spans(document, spans, min_chunk_chars=self.min_chunk_chars, counts=counts):
                chunks.append(make_chunk(text, piece, index=len(chunks), chunk_type=TEXT, headers=headers))
        return ChunkedDocument(chunks, counts)
