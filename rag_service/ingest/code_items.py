"""Go's and Rust's items for the ``code`` strategy: which definition lines of ``code_generic`` are items, and where
Go's grouped declarations and Rust's bracketed macros end. A heuristic over lines and braces, as the rest of the
generic path.

- **Go** declares at the top level only: a ``func``, ``type``, ``var`` or ``const`` line at brace depth 0 starts a
  definition, never a function literal in a body (``defer func() {``, ``Run: func(...) {``). A group (``type (``,
  ``var (``, ``const (``) ends at its closing ``)`` line, and each spec in it (``Point struct{...}``, ``ErrClosed =
  ...``), with its comment, is a definition of its own.
- **Rust** items start with their keyword (``fn``, ``struct``, ``enum``, ``union``, ``trait``, ``impl``, ``mod``,
  ``type``, ``const``, ``static``, ``macro_rules!``, after a visibility and qualifiers), never with a statement of a
  body (``let (a, b) = match x {``, ``Some(y) => match z {``). A ``mod x;`` declaration is no definition; a
  ``macro_rules!`` body holds none (``fn $name()`` is a pattern); ``type``, ``const`` and ``static`` items count at
  the top level and in a ``mod``, not in an ``impl``, ``trait`` or function (an associated type goes with the code
  around it). A ``macro_rules!`` in parens or brackets (``macro_rules! m ( ... );``) ends with the line of its
  closing delimiter (``macro_end``); one in braces ends as any block.
- A value (Go's ``var``/``const``, Rust's ``const``/``static``) is a definition only where a comment documents it.
- A Rust ``impl``, ``trait`` or ``mod`` is a container (``is_container``: chunked as its items, as Go's methods are),
  and an attribute over several lines (``#[cfg(any(`` ... ``))]``) leads its item (``attribute_start``).
"""

from __future__ import annotations

import re

from rag_service.ingest.code_lines import line_end
from rag_service.ingest.code_scan import Scan

#: the languages whose definitions are read as their items here
ITEM_LANGUAGES = frozenset({"go", "rust"})
#: the words besides LangChain's that start a Go definition (they are JS statements, hence not theirs)
GO_KEYWORDS = ("var", "const")
_RUST_QUALIFIERS = (
    r"[ \t]*(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:default[ \t]+)?(?:const[ \t]+)?(?:async[ \t]+)?(?:unsafe[ \t]+)?"
    r"(?:extern[ \t]+\"[^\"\n]*\"[ \t]+)?"
)
#: a Rust item's first line (``pub(crate) unsafe fn``, ``impl<T>``, ``pub static mut``, ``macro_rules! name``)
RUST_ITEM_FORM = (
    _RUST_QUALIFIERS + r"(?:(?:fn|impl|struct|enum|trait|mod|union|type|const|static)\b|macro_rules![ \t]*[A-Za-z_])"
)
_RUST_ITEM = re.compile(RUST_ITEM_FORM)
#: a Rust item and its name (``r#type`` is ``type``; ``const _`` has none)
_RUST_NAMED = re.compile(
    _RUST_QUALIFIERS
    + r"(?:(?:fn|struct|enum|trait|mod|union|type|const|static(?:[ \t]+(?:mut|ref))?)[ \t]+|macro_rules![ \t]*)"
    r"(?:r#)?([A-Za-z_]\w*)"
)
_RUST_DECLARATION = re.compile(_RUST_QUALIFIERS + r"mod[ \t]+\w+[ \t]*;")
_RUST_LEAF = re.compile(r"[ \t]*macro_rules!")
_RUST_BRACKETED_MACRO = re.compile(r"[ \t]*macro_rules![ \t]*[A-Za-z_]\w*\s*([(\[])")
_BRACKETS = {"(": re.compile(r"[()]"), "[": re.compile(r"[\[\]]")}
_RUST_CONTAINER = re.compile(_RUST_QUALIFIERS + r"(?:impl|trait|mod)\b")
_RUST_MOD = re.compile(_RUST_QUALIFIERS + r"mod\b")
_RUST_VALUE_FORM = r"[ \t]*(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:static|const(?![ \t]+(?:fn|unsafe|async|extern)\b)"
_RUST_TOP_ONLY = re.compile(_RUST_VALUE_FORM + r"|type)\b")
#: the lines a Rust attribute may take
_ATTRIBUTE_LINES = 12
_RUST_VALUE = re.compile(_RUST_VALUE_FORM + r")\b")
_GO_VALUE = re.compile(r"(?:var|const)\b")
_GO_GROUP = re.compile(r"^(?:type|var|const)[ \t]*\([ \t]*(?://[^\n]*)?$", re.MULTILINE)
_GO_GROUP_END = re.compile(r"^\)", re.MULTILINE)
_GO_SPEC = re.compile(r"[ \t]+([A-Za-z_]\w*)")
_GO_DECLARED = re.compile(r"(?:type|var|const)[ \t]+([A-Za-z_]\w*)")


def is_item_start(text: str, language: str, start: int, first: int, scan: Scan) -> bool:
    """Whether the candidate line at ``start`` (its first non-blank character at ``first``) starts an item."""
    line = text[start : line_end(text, start)]
    if language == "go":
        return scan.depth(first) == 0
    return _RUST_ITEM.match(line) is not None and _RUST_DECLARATION.match(line) is None


def go_spec_starts(text: str, scan: Scan) -> list[int]:
    """The starts of the specs of Go's grouped declarations: the lines inside a group at its first spec's
    indentation and brace depth 0 that start with a name (comments, a struct's fields, a value's lines are not)."""
    starts: list[int] = []
    for group in _GO_GROUP.finditer(text):
        end = group_end(text, group.start())
        position, indent = line_end(text, group.start()), None
        while position < end:
            after = line_end(text, position)
            spec = _GO_SPEC.match(text, position, after)
            width = spec.start(1) - position if spec else -1
            if spec is not None and scan.skipped_at(spec.start(1)) is None and scan.depth(spec.start(1)) == 0:
                indent = width if indent is None else indent
                if width == indent:
                    starts.append(position)
            position = after
    return starts


def group_end(text: str, start: int) -> int:
    """Past the ``)`` line closing the Go group whose first line starts at ``start`` (the text's end if none)."""
    closing = _GO_GROUP_END.search(text, line_end(text, start))
    return len(text) if closing is None else line_end(text, closing.start())


def is_group(text: str, start: int) -> bool:
    """Whether the line at ``start`` opens a Go group (``type (``, ``var (``, ``const (``)."""
    return _GO_GROUP.match(text, start) is not None


def macro_end(text: str, start: int, scan: Scan) -> int | None:
    """Past the line closing the Rust ``macro_rules!`` at ``start`` whose rules are in parens or brackets (the
    text's end if none does); None for any other item (a ``macro_rules! m {`` ends as any block)."""
    macro = _RUST_BRACKETED_MACRO.match(text, start)
    if macro is None:
        return None
    depth = 0
    for bracket in _BRACKETS[macro[1]].finditer(text, macro.start(1)):
        if scan.skipped_at(bracket.start()) is not None:
            continue  # in a comment, string or char literal
        depth += 1 if bracket[0] == macro[1] else -1
        if depth == 0:
            return line_end(text, bracket.start())
    return len(text)


def is_container(text: str, start: int) -> bool:
    """Whether the Rust item at ``start`` is an ``impl``, ``trait`` or ``mod`` block (chunked as its items)."""
    return _RUST_CONTAINER.match(text, start) is not None


def keeps_item(text: str, language: str, parent: int | None, start: int, *, documented: bool) -> bool:
    """Whether the item starting at ``start`` (inside the one starting at ``parent``, if any) is a definition: in
    Rust none inside a ``macro_rules!``, and a ``type``, ``const`` or ``static`` only at the top level or in a
    ``mod``; a Go ``var``/``const`` (or a spec of their groups) and a Rust ``const``/``static`` only where a comment
    or attribute ``documented`` it (an undocumented ``var minNamePadding = 11`` stays with the code around it: as a
    chunk of its own, named after itself, it outranked the function its name is part of)."""
    if language == "go":
        if is_group(text, start):
            return True
        value = _GO_VALUE.match(text, start) or (parent is not None and _GO_VALUE.match(text, parent))
        return documented or not value
    if parent is not None and _RUST_LEAF.match(text, parent):
        return False
    if parent is not None and _RUST_TOP_ONLY.match(text, start) and not _RUST_MOD.match(text, parent):
        return False
    return documented or not _RUST_VALUE.match(text, start)


def attribute_start(text: str, end_line: int) -> int | None:
    """The start of the line opening the Rust attribute whose last line starts at ``end_line`` (``#[cfg(any(`` ...
    ``))]``), at most ``_ATTRIBUTE_LINES`` lines up; None if no ``#[`` there balances its brackets."""
    start, closing = end_line, text.find("\n", end_line)
    for _ in range(_ATTRIBUTE_LINES):
        if start == 0:
            return None
        start = text.rfind("\n", 0, start - 1) + 1
        if text[start:closing].lstrip().startswith("#[") and _balanced(text[start:closing]):
            return start
    return None


def _balanced(code: str) -> bool:
    return code.count("[") == code.count("]") and code.count("(") == code.count(")")


def item_names(line: str, language: str) -> tuple[str, ...] | None:
    """The name of the Go declaration or spec, or of the Rust item (not ``impl``), on ``line``; None when ``line``
    is not one of those (a Go ``func``: ``code_names`` reads it)."""
    if language == "rust":
        named = _RUST_NAMED.match(line)
        return None if named is None else (() if named[1] == "_" else (named[1],))
    if _GO_GROUP.match(line):
        return ()  # a group is named by its specs
    declared = _GO_DECLARED.match(line)
    if declared is not None:
        return (declared[1],)
    spec = _GO_SPEC.match(line)
    return (spec[1],) if spec is not None and not line.lstrip().startswith("func") else None
