"""The section titles of an AsciiDoc text, read line by line with exact offsets.

Asciidoctor's rules, as far as sections need them (docs.asciidoctor.org, "Sections"):

- a title is a line of ``=`` (or, Markdown style, ``#``) one to six times, a space, then the title, at the start of
  a block (after a blank line, the text's start, another title, or the lines that may stand above a block: an
  anchor ``[[install]]``/``[#install]``, an attribute list ``[source,python]``, a block title ``.Example``). One
  ``=`` is the document's title (h1), ``==`` a first-level section (h2), and so on;
- a title under ``[discrete]`` or ``[float]`` is a heading outside the section structure: it opens no section;
- nothing inside a delimited block is a title: listing ``----``, literal ``....``, example ``====``, sidebar
  ``****``, quote ``____``, passthrough ``++++``, comment ``////`` (four or more of the character, closed by the
  same line), open ``--``, a table ``|===`` and a fenced ``````` block; a delimiter line opens one even right under
  a paragraph's line. An unclosed block runs to the end.

An anchor line (``[[install]]``, ``[#install]``) names the title under it for links; it is an anchor line. A title
reads its built-in character references (``C{plus}{plus}``: ``C++``). Two-line titles (a line over ``~~~~``), the
legacy form Antora does not read either, are not read.
Written here: Python has no maintained AsciiDoc parser that reports where a section starts (asciidoc-py, the
legacy one, renders documents), and sections need only these line rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rag_service.markdown_lines import Header, Line, LineKind

#: an anchor for cross-references, which renders as nothing: ``[[install]]``, ``[[install,Install]]``, ``[#install]``
ANCHOR_LINE = re.compile(r"\[\[[^\[\]\s]+\]\]|\[#[^\[\],.\s%]+\]")
_TITLE = re.compile(r"(={1,6}|#{1,6})[ \t]+(\S.*)")
_DELIMITER = re.compile(r"-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|--|[|,:!]={3,}")
#: a line that may stand above a block: an anchor, an attribute list ``[source,python]``, a block title ``.Example``
_ABOVE_BLOCK = re.compile(ANCHOR_LINE.pattern + r"|\[[^\]]*\][ \t]*|\.[^.\s].*")
_DISCRETE = re.compile(r"\[(?:discrete|float)\b[^\]]*\][ \t]*")
#: Asciidoctor's built-in attributes for characters a title cannot write plainly (``C{plus}{plus}``)
_CHARACTERS = {
    "plus": "+", "pp": "++", "cpp": "C++", "amp": "&", "lt": "<", "gt": ">", "startsb": "[", "endsb": "]",
    "vbar": "|", "caret": "^", "asterisk": "*", "tilde": "~", "apos": "'", "quot": '"', "backslash": "\\",
    "backtick": "`", "two-colons": "::", "two-semicolons": ";;", "sp": " ", "nbsp": "\u00a0", "empty": "",
}  # fmt: skip
_CHARACTER_REFERENCE = re.compile(r"\{(" + "|".join(map(re.escape, _CHARACTERS)) + r")\}")


def asciidoc_lines(text: str) -> Iterator[Line]:
    """Every line of ``text`` in order as ``markdown_lines.Line``: blank, text, title, block delimiter or code.

    A title line is ``HEADER`` with its ``Header``; a delimited block's delimiter lines are ``FENCE`` and the lines
    between them ``CODE``. ``\\r`` before ``\\n`` belongs to the line ending.
    """
    closer = ""  # while inside a delimited block: the line that closes it
    block_start, discrete = True, False
    start = 0
    for raw in text.split("\n"):
        line = raw[:-1] if raw[-1:] == "\r" else raw
        end = start + len(line)
        bare = line.rstrip(" \t")
        kind, header = LineKind.TEXT, None
        if closer:
            kind = LineKind.CODE
            if bare == closer:
                kind, closer, block_start = LineKind.FENCE, "", True
        elif not bare.strip():
            kind, block_start, discrete = LineKind.BLANK, True, False
        elif delimiter := _delimiter(bare):
            kind, closer = LineKind.FENCE, delimiter
        elif block_start and (title := _TITLE.fullmatch(bare)) and not discrete:
            header = Header(len(title[1]), _title_text(title[2], title[1]), start, end)
            kind = LineKind.HEADER
        elif block_start and _ABOVE_BLOCK.fullmatch(bare):
            discrete = discrete or bool(_DISCRETE.fullmatch(bare))  # the lines above a block: it starts below them
        elif not (block_start and discrete and _TITLE.fullmatch(bare)):
            block_start = False
        if kind is LineKind.HEADER or (kind is LineKind.TEXT and discrete and _TITLE.fullmatch(bare)):
            discrete = False  # a title ends a block of its own: the next line may start one
        yield Line(start, end, kind, header)
        start += len(raw) + 1


def _title_text(text: str, marks: str) -> str:
    """A title's words (``text`` right-stripped): without the closing marks of the symmetric form (``== Title ==``)
    and its own trailing anchor (``[[id]]``), character references read. No regex over the line's end: one with a
    lazy title and optional closing marks backtracked quadratically over a long run of spaces (20,000: 2 s)."""
    if text.endswith(marks) and text[: -len(marks)].endswith((" ", "\t")):
        text = text[: -len(marks)].rstrip(" \t")
    if text.endswith("]]") and (anchor := text.rfind("[[")) > 0 and "]" not in text[anchor + 2 : -2]:
        text = text[:anchor].rstrip(" \t")
    return _CHARACTER_REFERENCE.sub(lambda m: _CHARACTERS[m[1]], text)


def _delimiter(line: str) -> str:
    """The line that closes the delimited block ``line`` opens, or ``""`` (a fence ```` ```python ```` by ```````)."""
    if line.startswith("```"):
        return "`" * (len(line) - len(line.lstrip("`")))
    return line if _DELIMITER.fullmatch(line) else ""


def asciidoc_headers(text: str) -> list[Header]:
    """The section titles of ``text`` in order."""
    return [line.header for line in asciidoc_lines(text) if line.header is not None]


def asciidoc_title(text: str) -> str:
    """The document's title: its ``= Title`` line, else ``""``."""
    return next((h.title for h in asciidoc_headers(text) if h.level == 1), "")
