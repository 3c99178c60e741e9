"""The section titles of an AsciiDoc text, read line by line with exact offsets.

Asciidoctor's rules, as far as sections need them (docs.asciidoctor.org, "Sections"; checked against Asciidoctor
2.0.18 on real files and edge cases, audit 59):

- a title is a line of ``=`` (or, Markdown style, ``#``) one to six times, a space, then the title, at the start of
  a block; or a two-line title: a line with a word in it (not a ``.Block title``) over a line of one of ``= - ~ ^ +``
  within one character of its length. One ``=`` (or an ``=`` underline) is the document's title (h1), ``==`` (``-``)
  a first-level section (h2), and so on;
- a block starts after a blank line, the text's start or a title. The lines that may stand above a block leave
  that as it is: an anchor (``[[install]]``, ``[#install]``, ``[id="install"]``), an attribute list
  (``[source,python]``), a block title (``.Example``), an attribute entry (``:toc: left``), and at any place a line
  comment (``// ...``) or a preprocessor line (``ifdef::x[]``, ``endif::[]``, ``include::a.adoc[]``), which
  Asciidoctor drops before it reads blocks;
- a title under ``[discrete]`` or ``[float]`` (blank lines between allowed) opens no section;
- nothing inside a delimited block is a title: listing ``----``, literal ``....``, example ``====``, sidebar
  ``****``, quote ``____``, passthrough ``++++``, comment ``////`` (four or more of the character, closed by the
  same line), open ``--``, a table ``|===`` and a fenced ``````` block; a delimiter line opens one even right under
  a paragraph's line (unless it underlines a two-line title). An unclosed block runs to the end.

Lines that render no text (anchors, attribute lists and entries, comments, preprocessor lines, ``toc::[]``) are
``MARKUP``; an anchor also names the title under it for links (``ANCHOR_LINE``). A title reads as shown: attribute
references of the file's own entries (``{product}``; the document title's from the entries under it too) and the
built-in character ones (``C{plus}{plus}``) replaced, ``link:``/``xref:`` macros, URLs with text and ``<<id,text>>``
reduced to their text, ``*strong*`` and ``_emphasis_`` unmarked. Written here: Python has no maintained AsciiDoc
parser that reports where a section starts (asciidoc-py, the legacy one, renders documents), and sections need
only these line rules.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from rag_service.markdown_lines import Header, Line, LineKind

#: an anchor for cross-references, which renders as nothing: ``[[install]]``, ``[[install,Install it]]``,
#: ``[#install]``, ``[#install.role]``, ``[id="install_{context}"]``
ANCHOR_LINE = re.compile(r"\[\[[^\[\]\s,]+(?:,[^\[\]]*)?\]\]|\[#[^\[\],.\s%]+[^\[\],\s]*\]|\[id=(\"?)[^\]\"]+\1\]")
_TITLE = re.compile(r"(={1,6}|#{1,6})[ \t]+(\S.*)")
_DELIMITER = re.compile(r"-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|--|[|,:!]={3,}")
_UNDERLINE = re.compile(r"(=+|-+|~+|\^+|\++)[ \t]*")
_UNDERLINE_LEVELS = {"=": 1, "-": 2, "~": 3, "^": 4, "+": 5}
#: lines that may stand above a block without ending its start: an anchor, an attribute list, a block title
_ABOVE_BLOCK = re.compile(ANCHOR_LINE.pattern + r"|\[[^\]]*\][ \t]*|\.[^.\s].*")
_ATTRIBUTE_ENTRY = re.compile(r":(!?)(\w[\w-]*)(!?):(?:[ \t]+(.*))?")
#: lines Asciidoctor drops before it reads blocks: a line comment, a preprocessor directive
_DROPPED = re.compile(r"//(?:[^/].*)?|(?:ifn?def|ifeval|endif|include)::\S*\[.*\]")
_DISCRETE = re.compile(r"\[(?:discrete|float)\b[^\]]*\][ \t]*")
#: Asciidoctor's built-in attributes for characters a title cannot write plainly (``C{plus}{plus}``)
_CHARACTERS = {
    "plus": "+", "pp": "++", "cpp": "C++", "amp": "&", "lt": "<", "gt": ">", "startsb": "[", "endsb": "]",
    "vbar": "|", "caret": "^", "asterisk": "*", "tilde": "~", "apos": "'", "quot": '"', "backslash": "\\",
    "backtick": "`", "two-colons": "::", "two-semicolons": ";;", "sp": " ", "nbsp": "\u00a0", "empty": "",
}  # fmt: skip
#: an attribute reference, ``{product}``
ATTRIBUTE_REFERENCE = re.compile(r"\{([\w-]+)\}")
_MACRO_TEXT = re.compile(r"\b(?:link|xref|mailto):[^\s\[]*\[([^\]]*)\]|\bhttps?://[^\s\[]+\[([^\]]+)\]")
_CROSS_REFERENCE = re.compile(r"<<([^,>]+)(?:,\s*([^>]+))?>>")
_CONSTRAINED = re.compile(r"(?<!\w)([*_])(\S(?:[^*_]*\S)?)\1(?!\w)")


def asciidoc_lines(text: str) -> Iterator[Line]:
    """Every line of ``text`` in order as ``markdown_lines.Line``: blank, text, title, markup, delimiter or code.

    A title's first line is ``HEADER`` with its ``Header`` (a two-line title's underline is ``SETEXT_UNDERLINE``);
    a delimited block's delimiter lines are ``FENCE`` and the lines between them ``CODE``; lines that render no text
    are ``MARKUP``. ``\\r`` before ``\\n`` belongs to the line ending.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for raw in text.split("\n"):
        spans.append((start, start + len(raw) - (raw[-1:] == "\r")))
        start += len(raw) + 1
    bares = [text[s:e].rstrip(" \t") for s, e in spans]
    attributes: dict[str, str] = {}
    closer = ""  # while inside a delimited block: the line that closes it
    block_start, discrete = True, False
    in_header = False  # after the document's ``= Title``, to the first blank line: author, revision, attributes
    i = 0
    while i < len(spans):
        bare = bares[i]
        kind, header, count = LineKind.TEXT, None, 1
        if closer:
            kind = LineKind.CODE
            if bare == closer:
                kind, closer, block_start = LineKind.FENCE, "", True
        elif not bare.strip():
            kind, block_start, in_header = LineKind.BLANK, True, False
        elif _DROPPED.fullmatch(bare) or (block_start and bare == "toc::[]"):
            kind = LineKind.MARKUP
        elif block_start and (entry := _ATTRIBUTE_ENTRY.fullmatch(bare)):
            kind = LineKind.MARKUP
            _set_attribute(attributes, entry)
        elif block_start and _ABOVE_BLOCK.fullmatch(bare):
            kind = LineKind.TEXT if bare.startswith(".") else LineKind.MARKUP  # a block title is shown
            discrete = discrete or bool(_DISCRETE.fullmatch(bare))
        elif block_start and (found := _title_at(bares, i)) is not None:
            level, title, count = found
            if level == 1 and count == 1:  # the document's header: its entries under the title apply to it too
                for below in itertools.takewhile(str.strip, bares[i + 1 :]):
                    if entry := _ATTRIBUTE_ENTRY.fullmatch(below):
                        _set_attribute(attributes, entry)
            if not discrete:
                kind = LineKind.HEADER
                header = Header(level, _shown(title, attributes), spans[i][0], spans[i + count - 1][1])
            discrete = False
        elif delimiter := _delimiter(bare):
            kind, closer, discrete = LineKind.FENCE, delimiter, False
        elif not in_header:  # the header's author and revision lines leave the attributes under them entries
            block_start = discrete = False
        in_header = in_header or (header is not None and header.level == 1 and count == 1)
        yield Line(*spans[i], kind, header)
        for j in range(i + 1, i + count):
            yield Line(*spans[j], LineKind.SETEXT_UNDERLINE, None)
        i += count


def _set_attribute(attributes: dict[str, str], entry: re.Match[str]) -> None:
    """Apply an attribute entry (``:name: value``; ``:name!:`` or ``:!name:`` unsets)."""
    if entry[1] or entry[3]:
        attributes.pop(entry[2], None)
    else:
        attributes[entry[2]] = entry[4] or ""


def _title_at(bares: list[str], i: int) -> tuple[int, str, int] | None:
    """``(level, title as written, lines)`` of the title starting at line ``i`` (the start of a block), or None."""
    one_line = _TITLE.fullmatch(bares[i])
    if one_line is not None:
        return len(one_line[1]), _without_closing(one_line[2], one_line[1]), 1
    title = bares[i].strip()
    if i + 1 >= len(bares) or title.startswith(".") or not re.search(r"\w", title) or _delimiter(title):
        return None
    underline = _UNDERLINE.fullmatch(bares[i + 1])
    if underline is None or abs(len(underline[1]) - len(title)) > 1 or bares[i][0].isspace():
        return None
    return _UNDERLINE_LEVELS[underline[1][0]], title, 2


def _without_closing(text: str, marks: str) -> str:
    """A one-line title's words without the closing marks of the symmetric form (``== Title ==``) and its own
    trailing anchor (``[[id]]``). No regex over the line's end: one with a lazy title and optional closing marks
    backtracked quadratically over a long run of spaces (20,000: 2 s)."""
    if text.endswith(marks) and text[: -len(marks)].endswith((" ", "\t")):
        text = text[: -len(marks)].rstrip(" \t")
    if text.endswith("]]") and (anchor := text.rfind("[[")) > 0 and "]" not in text[anchor + 2 : -2]:
        text = text[:anchor].rstrip(" \t")
    return text


def _shown(title: str, attributes: dict[str, str]) -> str:
    """A title as rendered: references replaced (the file's attributes, then the built-in characters), macros and
    cross references by their text, constrained ``*strong*`` and ``_emphasis_`` unmarked."""
    title = ATTRIBUTE_REFERENCE.sub(lambda m: attributes.get(m[1], _CHARACTERS.get(m[1], m[0])), title)
    title = _MACRO_TEXT.sub(lambda m: m[1] or m[2] or "", title)
    title = _CROSS_REFERENCE.sub(lambda m: m[2] or m[1], title)
    return _CONSTRAINED.sub(r"\2", title).strip()


def _delimiter(line: str) -> str:
    """The line that closes the delimited block ``line`` opens, or ``""`` (a fence ```` ```python ```` by ```````)."""
    if line.startswith("```"):
        return "`" * (len(line) - len(line.lstrip("`")))
    return line if _DELIMITER.fullmatch(line) else ""


def attribute_values(text: str) -> dict[str, str]:
    """The values the text's attribute entries give (``:product: Zephyr Vault``; the last entry of a name wins), read
    at any line that is one: a value for the references of a chunk's lead, not a renderer's exact scoping."""
    values: dict[str, str] = {}
    if ":" in text:
        for line in text.split("\n"):
            if line.startswith(":") and (entry := _ATTRIBUTE_ENTRY.fullmatch(line.rstrip())):
                _set_attribute(values, entry)
    return {name: value for name, value in values.items() if value}


def asciidoc_headers(text: str) -> list[Header]:
    """The section titles of ``text`` in order."""
    return [line.header for line in asciidoc_lines(text) if line.header is not None]


def asciidoc_title(text: str) -> str:
    """The document's title: its ``= Title``, else ``""`` (the file's name is used, as for markdown without an h1).

    Not the first section's title where there is no ``= Title``, as Asciidoctor's ``doctitle`` is: every chunk's
    vector and keywords carry the document's title, and a chapter's first section names only a part of it
    (anthropic-docs-qa in AsciiDoc, whose pages start at ``==``: nDCG@10 0.824 -> 0.814 with it, audit 59 item 10)."""
    return next((h.title for h in asciidoc_headers(text) if h.level == 1), "")
