"""The structure of a markdown text, read line by line: the one scanner every markdown reader uses.

The chunkers and their garbage filter, the loaders' titles, the link finder, the summaries and the
evaluation's section numbering all read headers, fences and front matter here. The rules follow
CommonMark where they overlap with it; where a reader needs a rule of its own, it is a field of
``ScanRules``, never a second scanner.

- A line ends at ``\\n``; a ``\\r`` before it belongs to the line ending, so CRLF text scans like LF
  text and every offset still points into the text as given.
- *Front matter*: the text starts with a line ``---``, and a later line ``---`` or ``...`` closes it
  (``FRONT_MATTER_PATTERN``; unclosed, there is none). Nothing in it is a header or a fence.
- *Fenced code*: a run of three or more backticks or tildes, indented at most three spaces, opens a
  fence (a backtick fence's info string has no backtick: ```` ``` a `b` ```` is inline code). A run
  of the same character at least as long, indented at most three spaces and followed only by spaces
  or tabs, closes it; an unclosed fence runs to the end of the text. Its lines are code.
- *ATX header*: outside fences, up to three spaces, ``#`` to ``######``, then a space, a tab or the
  end of the line; the title is the rest without its closing ``#`` run. A header without a title
  (``#``, ``## ##``) is a plain line unless ``ScanRules.empty_headers``.
- *Setext underline*: outside fences, a line of ``=`` (level 1) or ``-`` (level 2), indented at most
  three spaces, right under a text line, which is the header's title. Only the summary and the
  loaders' titles (a ``=`` h1) read them; no chunker or section rule splits at them (a ``---`` under
  a line is a separator in some documentation sets, e.g. anthropic-docs-qa's ticket-routing page).

Indented code blocks, block quotes and list items are not parsed: a ``#`` line inside them counts as
if it stood alone, and so does a fence unless ``ScanRules.list_fences``. Written here rather than
taken from a CommonMark parser (markdown-it-py) because every reader needs exact character offsets
and per-line kinds, and the evaluation's rule deliberately departs from CommonMark.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

#: YAML front matter at the very start of a text; group 1 is its body
FRONT_MATTER_PATTERN = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*\r?(?=\n|\Z)", re.DOTALL)
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
# with ``list_fences``: any indentation, and a list marker may come first ("- ```shell")
_LIST_FENCE_OPEN = re.compile(r"[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(`{3,}|~{3,})(.*)")
_LIST_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
_ATX_CLOSING = re.compile(r"(?:^|[ \t])#+\s*$")
_SETEXT_UNDERLINE = re.compile(r" {0,3}(=+|-+)[ \t]*")
#: a line (stripped) that only names a place for links and renders as nothing: a MyST target ``(name)=``, as
#: Sphinx documentation puts before its headers, or an empty HTML anchor ``<a id="name"></a>``
ANCHOR_LINE = re.compile(r"\([^)\s]+\)=|<a\s[^>]*>\s*</a>")
#: first characters of a line (after up to three spaces) that may start a fence, a header or an underline
_STRUCTURE_CHARS = frozenset("`~#=-")


@dataclass(frozen=True, slots=True)
class ScanRules:
    """Where a reader's rule departs from the default one (chunkers, garbage filter, titles, links)."""

    #: a ``#`` line without a title (``#``, ``## ##``) is a header, as in CommonMark
    empty_headers: bool = False
    #: front matter at the start is set apart (its lines are neither headers nor fences)
    front_matter: bool = True
    #: a fence may be indented further, or follow a list marker, as inside list items
    list_fences: bool = False


#: the rule of the chunkers, the garbage filter, the loaders' titles and the links
DEFAULT_RULES = ScanRules()


class LineKind(IntEnum):
    """What one line of a markdown text is."""

    BLANK = 0  # only whitespace, outside fences and front matter
    TEXT = 1  # anything else outside fences and front matter
    HEADER = 2  # an ATX header
    SETEXT_UNDERLINE = 3  # ``===`` or ``---`` under a text line
    FENCE = 4  # an opening or closing fence line
    CODE = 5  # a line inside fenced code (blank ones too)
    FRONT_MATTER = 6  # a line of the front matter, its ``---`` lines included
    #: a line that renders no text, in the other markups' readers (``rst_lines``, ``asciidoc_lines``): a comment, a
    #: directive's options, an attribute entry; the markdown scanner gives none
    MARKUP = 7


_BLANK, _TEXT, _HEADER, _SETEXT_UNDERLINE_KIND, _FENCE, _CODE, _FRONT_MATTER, _ = LineKind


@dataclass(frozen=True, slots=True)
class Header:
    """A header: ``level`` 1-6 and ``title``; ``start``/``end`` delimit its line(s) without the line ending."""

    level: int
    title: str
    start: int
    end: int


class Line(NamedTuple):
    """One line: ``text[start:end]`` without its line ending, its kind, and the header it makes.

    ``header`` is set on ``HEADER`` lines and on ``SETEXT_UNDERLINE`` lines (spanning the title line too).
    """

    start: int
    end: int
    kind: LineKind
    header: Header | None


@dataclass(frozen=True, slots=True)
class FrontMatter:
    """Front matter: ``text[start:end]``, delimiter lines included; its body is ``text[body_start:body_end]``."""

    start: int
    end: int
    body_start: int
    body_end: int


@dataclass(frozen=True, slots=True)
class MarkdownStructure:
    """The structure of one text: headers, fenced code blocks and front matter, with exact offsets."""

    headers: list[Header]  # ATX headers
    setext_headers: list[Header]
    #: ``(start, end)`` of each fenced block, from its opening line to the end of its closing line
    code_blocks: list[tuple[int, int]]
    front_matter: FrontMatter | None


def find_front_matter(text: str) -> FrontMatter | None:
    """The front matter ``text`` starts with (``FRONT_MATTER_PATTERN``), or None."""
    match = FRONT_MATTER_PATTERN.match(text)
    return None if match is None else FrontMatter(0, match.end(), match.start(1), match.end(1))


def scan_lines(text: str, rules: ScanRules = DEFAULT_RULES) -> Iterator[Line]:
    """Every line of ``text`` in order, classified (see the module docstring); lazily, so a caller may stop early."""
    return _Scanner(text, rules).lines()


def atx_headers(text: str, rules: ScanRules = DEFAULT_RULES) -> Iterator[Header]:
    """The ATX headers of ``text`` in order, lazily."""
    for line in scan_lines(text, rules):
        if line.kind is LineKind.HEADER and line.header is not None:
            yield line.header


def scan(text: str, rules: ScanRules = DEFAULT_RULES) -> MarkdownStructure:
    """The structure of ``text``: its headers, fenced code blocks and front matter."""
    scanner = _Scanner(text, rules)
    headers: list[Header] = []
    setext: list[Header] = []
    code_blocks: list[tuple[int, int]] = []
    opened: int | None = None
    for line in scanner.lines():
        if line.header is not None:
            (headers if line.kind is LineKind.HEADER else setext).append(line.header)
        elif line.kind is LineKind.FENCE:
            if opened is None:
                opened = line.start
            else:
                code_blocks.append((opened, line.end))
                opened = None
    if opened is not None:
        code_blocks.append((opened, len(text)))
    return MarkdownStructure(headers, setext, code_blocks, scanner.front_matter)


class _Scanner:
    """One pass over one text's lines under one set of rules."""

    __slots__ = ("_close", "_open", "front_matter", "rules", "text")

    def __init__(self, text: str, rules: ScanRules) -> None:
        self.text = text
        self.rules = rules
        self.front_matter = find_front_matter(text) if rules.front_matter else None
        self._open, self._close = (
            (_LIST_FENCE_OPEN, _LIST_FENCE_CLOSE) if rules.list_fences else (_FENCE_OPEN, _FENCE_CLOSE)
        )

    def lines(self) -> Iterator[Line]:
        # the hot loop of every chunker: names bound locally, lines built by tuple.__new__ (a C call)
        new_line, structure, close_fence = tuple.__new__, self._structure, self._close.fullmatch
        text_kind, blank, code, fence_kind, front = _TEXT, _BLANK, _CODE, _FENCE, _FRONT_MATTER
        front_end = self.front_matter.end if self.front_matter is not None else -1
        any_start = self.rules.list_fences  # list fences may start with any character: test every line
        closer = ""  # while inside a fence: the shortest run that closes it
        previous_text: Line | None = None  # the line above, if it is TEXT
        start = 0
        for raw in self.text.split("\n"):
            line = raw[:-1] if raw[-1:] == "\r" else raw
            end = start + len(line)
            kind, header = text_kind, None
            if start < front_end:
                kind = front
            elif closer:
                kind = code
                # a run of the same character at least as long (startswith), alone on its line (fullmatch)
                if line.lstrip(" \t").startswith(closer) and close_fence(line):
                    kind, closer = fence_kind, ""
            elif not line.strip():
                kind = blank
            elif any_start or line.lstrip(" ")[:1] in _STRUCTURE_CHARS:  # a cheap test first: most lines are prose
                kind, closer, header = structure(line, start, end, previous_text)
            scanned: Line = new_line(Line, (start, end, kind, header))
            previous_text = scanned if kind is text_kind else None
            yield scanned
            start += len(raw) + 1

    def _structure(
        self, line: str, start: int, end: int, previous_text: Line | None
    ) -> tuple[LineKind, str, Header | None]:
        """The kind of a non-blank line outside fences that may be a fence, an ATX header or an underline.

        For an opening fence, also the shortest run that closes it; else ``""``.
        """
        opening = self._open.fullmatch(line)
        if opening and not (opening[1][0] == "`" and "`" in opening[2]):
            return _FENCE, opening[1], None
        atx = _ATX.fullmatch(line)
        if atx:
            title = _ATX_CLOSING.sub("", atx[2] or "").strip()
            if title or self.rules.empty_headers:
                return _HEADER, "", Header(len(atx[1]), title, start, end)
        if previous_text is not None and (underline := _SETEXT_UNDERLINE.fullmatch(line)):
            level = 1 if underline[1][0] == "=" else 2
            title = self.text[previous_text.start : previous_text.end].strip()
            return _SETEXT_UNDERLINE_KIND, "", Header(level, title, previous_text.start, end)
        return _TEXT, "", None
