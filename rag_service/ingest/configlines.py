"""The lines of a configuration file as the ``config`` strategy reads them, by their shape alone.

Each line says whether it opens an entry (a TOML table or key; a YAML key or list item) and at which indentation,
and whether it lies inside a value instead: a multi-line string (TOML ``\"\"\"``/``'''``, a YAML quoted scalar), a
YAML block scalar (``|``, ``>``), an open bracket (a TOML array, a YAML flow collection). A line inside a value
never opens a section, however it looks (``[section]`` in a TOML string, ``key:`` in a YAML ``run: |``). Comments
are seen as comments only outside strings (``# use \"\"\" here`` opens no string). YAML document markers (``---``,
``...``) are their own kind. ``tomllib`` and PyYAML give no character offsets and stop at the first error; this
reads any file, valid or not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

#: a TOML key part: bare, or quoted
_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
#: a TOML table line, ``[a.b]`` or ``[[a.b]]``, with an optional comment; group 1 is the name
TABLE = re.compile(rf"^[ \t]*\[\[?[ \t]*({_KEY}(?:[ \t]*\.[ \t]*{_KEY})*)[ \t]*\]\]?[ \t]*(?:#.*)?$")
#: a YAML mapping key (after its indentation): plain or quoted, then ``:`` and a blank or the end; group 2 is the key
YAML_KEY = re.compile(r"""^([ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s#:\-?'"!&*|>%@`{}\[\],][^:#\n]*?)[ \t]*:(?=[ \t]|$)""")
#: a YAML list item's dash (``- ``, also ``- - ``): what follows it is the item's own line
_ITEM = re.compile(r"[ \t]*-(?=[ \t]|$)")
#: a YAML document marker at a line's start; group 1 is what follows it
_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t]|$)(.*)$")
#: a YAML value that opens a block scalar: optional tag and anchor, then ``|`` or ``>`` with its indicators
_BLOCK = re.compile(r"^[ \t]*(?:[!&]\S*[ \t]+)*[|>][-+1-9]{0,2}[ \t]*(?:#.*)?$")
_COMMENT = re.compile(r"^[ \t]*#")
#: a YAML value that is none on its line: blanks, an anchor or a tag, a comment
_EMPTY = re.compile(r"^[ \t]*(?:[!&]\S*[ \t]*)*(?:#.*)?$")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a configuration file (``text`` without its ``\\n``, ``start`` the offset of its first character).

    ``entry``: it opens an entry outside any value (a TOML table or key, a YAML key or list item); ``key`` names the
    YAML key or TOML table it opens (None for a list item or a TOML key); ``item``: a YAML list item; ``table``: a
    TOML table line; ``marker``/``bare``: a YAML document marker, holding nothing else (a comment at most);
    ``comment``: a comment line outside any value; ``indent``: its leading spaces and tabs; ``opener``: an entry
    with no value on its line (``spec:``, ``- name:``, a TOML table line): its value is the lines below it.
    """

    start: int
    text: str
    indent: int
    entry: bool = False
    key: str | None = None
    item: bool = False
    table: bool = False
    marker: bool = False
    bare: bool = False
    comment: bool = False
    opener: bool = False

    @property
    def blank(self) -> bool:
        """Whitespace only."""
        return not self.text.strip()


def _split(text: str) -> list[tuple[int, str, int]]:
    """Each line of ``text`` with its start offset and indentation (``\\n`` ends a line)."""
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line, len(line) - len(line.lstrip(" \t"))))
        pos += len(line) + 1
    return out


def unquoted(key: str) -> str:
    """A key without its quotes."""
    return key[1:-1] if len(key) > 1 and key[0] in "\"'" and key[-1] == key[0] else key


def table_name(key: str) -> str:
    """A TOML table name as a header: its parts' quotes and the spaces around its dots dropped (a part holding a
    dot keeps its quotes: ``tool."a.b"``)."""
    parts = re.findall(_KEY, key)
    return ".".join(part if "." in unquoted(part) else unquoted(part) for part in parts)


# -- TOML ----------------------------------------------------------------------------------------------------------


def _toml_scan(line: str, quote: str | None, depth: int) -> tuple[str | None, int]:
    """The multi-line string and bracket depth a TOML line leaves open, given those it starts in."""
    i, n = 0, len(line)
    while i < n:
        if quote is not None:  # inside a multi-line string: to its closing delimiter
            if quote == '"""' and line[i] == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += 3
                while i < n and line[i] == quote[0]:  # up to two quotes of the content before the delimiter
                    i += 1
                quote = None
            else:
                i += 1
            continue
        char = line[i]
        if char == "#":
            break
        if line.startswith(('"""', "'''"), i):
            quote, i = line[i : i + 3], i + 3
        elif char in "\"'":  # a one-line string: to its closing quote (escapes in basic strings)
            i += 1
            while i < n and line[i] != char:
                i += 2 if char == '"' and line[i] == "\\" else 1
            i += 1
        else:
            depth += char in "[{"
            depth = max(depth - (char in "]}"), 0)
            i += 1
    return quote, depth


def _scanned_until_closed(scan: Callable[[str, set[int]], tuple[list[Line], int | None]], text: str) -> list[Line]:
    """``scan``'s lines of ``text``, scanned again with each value left open at the end read as none where it opened,
    until nothing is left open (or the same line is)."""
    ignored: set[int] = set()
    while True:
        lines, open_at = scan(text, ignored)
        if open_at is None or open_at in ignored:
            return lines
        ignored.add(open_at)


def toml_lines(text: str) -> list[Line]:
    """The lines of a TOML text: a table line (outside strings and arrays; unindented, also inside an array an
    invalid file left open) and each key line outside a value are entries. A multi-line string still open at the
    end is read as none (a stray triple quote of an invalid file hides no table)."""
    return _scanned_until_closed(_toml_scan_lines, text)


def _toml_scan_lines(text: str, ignored: set[int]) -> tuple[list[Line], int | None]:
    """``toml_lines`` with the strings opened on the lines ``ignored`` not read as open, and the line of a multi-line
    string left open at the end (None when none is)."""
    out: list[Line] = []
    quote: str | None = None
    depth, opened_at = 0, None
    for index, (start, line, indent) in enumerate(_split(text)):
        if quote is None and (depth == 0 or indent == 0) and (found := TABLE.match(line)) is not None:
            out.append(Line(start, line, indent, entry=True, key=table_name(found[1]), table=True, opener=True))
            depth = 0
            continue
        outside = quote is None and depth == 0
        comment = outside and bool(_COMMENT.match(line))
        out.append(Line(start, line, indent, entry=outside and bool(line.strip()) and not comment, comment=comment))
        before = quote
        quote, depth = _toml_scan(line, quote, depth)
        if before is None and quote is not None:
            if index in ignored:
                quote = None
            else:
                opened_at = index
    return out, (opened_at if quote is not None else None)


# -- INI -----------------------------------------------------------------------------------------------------------

#: an INI section line at a line's start, ``[testenv:py311]``, with an optional comment; group 1 is the name
INI_SECTION = re.compile(r"^\[([^\[\]\n]+)\][ \t]*(?:[#;].*)?$")
_INI_COMMENT = re.compile(r"^[ \t]*[#;]")


def ini_lines(text: str) -> list[Line]:
    """The lines of an INI text (``setup.cfg``, ``tox.ini``): a section line is a table, each unindented key line an
    entry; an indented line continues the value above it, and ``#`` or ``;`` opens a comment line."""
    out: list[Line] = []
    for start, line, indent in _split(text):
        if (found := INI_SECTION.match(line)) is not None:
            out.append(Line(start, line, indent, entry=True, key=found[1].strip(), table=True, opener=True))
            continue
        comment = bool(_INI_COMMENT.match(line))
        out.append(Line(start, line, indent, entry=not indent and bool(line.strip()) and not comment, comment=comment))
    return out


# -- YAML ----------------------------------------------------------------------------------------------------------


def _closes(value: str, quote: str) -> int:
    """Where the quoted scalar ``value`` (from after its opening quote) ends, or -1 when it goes on past the line."""
    i = 0
    while i < len(value):
        if quote == '"' and value[i] == "\\":
            i += 2
        elif value[i] == quote:
            if quote == "'" and value[i + 1 : i + 2] == "'":  # '' is a quote inside a single-quoted scalar
                i += 2
                continue
            return i
        else:
            i += 1
    return -1


def _flow(text: str, depth: int) -> int:
    """The depth of open flow brackets (``[``, ``{``) after ``text``, given the depth before it (quoted text and a
    comment skipped)."""
    i = 0
    while i < len(text):
        char = text[i]
        if char in "\"'":
            end = _closes(text[i + 1 :], char)
            if end < 0:
                return depth
            i += end + 2
            continue
        if char == "#" and (i == 0 or text[i - 1] in " \t"):
            break
        depth = max(depth + (char in "[{") - (char in "]}"), 0)
        i += 1
    return depth


@dataclass(slots=True)
class _YamlState:
    """What a YAML value left open: a block scalar (its first line is more indented than ``block``, the others as
    indented as that one: ``lines``), a quoted scalar (its quote), brackets (``flow``)."""

    block: int | None = None
    lines: int | None = None
    quote: str | None = None
    flow: int = 0


def _opened(value: str, parent: int, state: _YamlState) -> None:
    """Record in ``state`` what ``value`` (a line's text after its key or dash) opens, ``parent`` the column a block
    scalar's lines must be indented past."""
    stripped = value.lstrip(" \t")
    if _BLOCK.match(value):
        state.block, state.lines = parent, None
    elif stripped[:1] in ("'", '"'):
        end = _closes(stripped[1:], stripped[0])
        if end < 0:
            state.quote = stripped[0]
    elif stripped[:1] in ("[", "{"):  # a flow collection (brackets inside a plain scalar are its text)
        state.flow = _flow(stripped, 0)


def _inside(line: str, indent: int, state: _YamlState) -> bool:
    """Whether ``line`` lies inside the value ``state`` holds open (and update it); a document marker ends any."""
    if _MARKER.match(line):
        state.block, state.quote, state.flow = None, None, 0
        return False
    if state.block is not None:
        if not line.strip():
            return True
        if state.lines is None and indent > state.block:
            state.lines = indent  # its first line sets its indentation
        if state.lines is not None and indent >= state.lines:
            return True
        state.block = None
    if state.quote is not None:
        end = _closes(line, state.quote)
        if end >= 0:
            state.quote = None
        return True
    if state.flow:
        state.flow = _flow(line, state.flow)
        return True
    return False


def yaml_lines(text: str) -> list[Line]:
    """The lines of a YAML text: keys and list items outside a value are entries; document markers at column 0. A
    quoted scalar or bracket still open at the end is read as none (an invalid file's stray quote hides no key)."""
    return _scanned_until_closed(_yaml_scan_lines, text)


def _yaml_scan_lines(text: str, ignored: set[int]) -> tuple[list[Line], int | None]:
    """``yaml_lines`` with the values opened on the lines ``ignored`` not read as open, and the line of a quoted
    scalar or bracket left open at the end (None when none is)."""
    out: list[Line] = []
    state = _YamlState()
    opened_at = None
    for index, (start, line, indent) in enumerate(_split(text)):
        if _inside(line, indent, state):
            out.append(Line(start, line, indent))
            continue
        if not line.strip() or _COMMENT.match(line):
            out.append(Line(start, line, indent, comment=bool(line.strip())))
            continue
        if (marker := _MARKER.match(line)) is not None:
            rest = marker[1]
            bare = not rest.strip() or bool(_COMMENT.match(rest))
            if not bare:
                _opened(rest, -1, state)  # ``--- |``: the document is a block scalar
            out.append(Line(start, line, indent, marker=True, bare=bare))
        else:
            at, item = indent, False
            while (dash := _ITEM.match(line, at)) is not None:  # ``- `` and ``- - `` before the item's own text
                item, at = True, len(line) - len(line[dash.end() :].lstrip(" \t"))
            found = YAML_KEY.match(line[at:])
            value = line[at + found.end() :] if found is not None else line[at:]
            _opened(value, at if found is not None else indent - (not item), state)  # a bare ``|``: its document
            key = unquoted(found[2]) if found is not None and not item else None
            opener = _EMPTY.match(value) is not None
            out.append(Line(start, line, indent, entry=item or found is not None, key=key, item=item, opener=opener))
        if state.quote is not None or state.flow:
            if index in ignored:
                state.quote, state.flow = None, 0
            else:
                opened_at = index
    return out, (opened_at if state.quote is not None or state.flow else None)
