"""The section titles of a reStructuredText text, read line by line with exact offsets.

Docutils' rules for titles (restructuredtext.html#sections), as far as sections need them:

- an *adornment* line is one 7-bit punctuation character (``= - ` : ' " ~ ^ _ * + # < >`` and the
  rest) repeated, trailing spaces allowed;
- a title is a text line at column 0 that starts a block (after a blank line, the text's start,
  another title, an indented block's last line, or one line of explicit markup or a field) with an adornment line right
  under it at least as long as the title, or at least 4 characters long (docutils warns, and takes
  it); with an overline as well, the overline is the same character and length as the underline and
  the title line may be inset. A bullet item, an explicit markup line (``.. note::``), a field
  (``:param x:``), a line block (``| ...``) or a doctest (``>>>``) is no title;
- levels follow the order in which the adornment styles (character, with or without overline) first
  appear: the first style seen is level 1. Deeper than 6 counts as 6.

Literal blocks, directive bodies and block quotes are indented, so nothing in them starts a title.
A label (``.. _install:``), as Sphinx documentation puts before its titles, is an anchor line; lines that render no
text are markup (``rst_markup``). A title reads as rendered (``rst_markup.shown_title``): ``:mod:`bisect``` as
``bisect``, a substitution the file defines replaced.
Written here rather than read through docutils: docutils reports line numbers, not character
offsets, and parses (and reports errors on) far more than sections need.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rag_service.markdown_lines import Header, Line, LineKind
from rag_service.rst_markup import GRID_BORDER, OPTION, explicit_markup, shown_title, substitutions

#: a label for cross-references, which renders as nothing: ``.. _install-guide:`` (the name may be quoted)
LABEL_LINE = re.compile(r"\.\. _(?:`[^`]+`|[^:`\s][^:`]*):")
_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1*[ \t]*")
#: lines that start a construct of their own even when an adornment line follows them
_NOT_TITLE = re.compile(r"(?:[-*+\u2022\u2023\u2043][ \t]|\.\.(?:[ \t]|$)|:[^:\s][^:]*:(?:[ \t]|$)|\|(?:[ \t]|$)|>>>)")
_EXPLICIT = re.compile(r"\.\.(?:[ \t]|$)")
#: a field at the document's start (``:orphan:``, ``:tocdepth: 2``), which Sphinx reads as metadata
_FIELD = re.compile(r":[\w-]+:(?:[ \t].*)?")
MAX_LEVEL = 6


def _adornment(line: str) -> str:
    """``line`` without trailing spaces if it is an adornment line, else ``""``."""
    return line.rstrip(" \t") if _ADORNMENT.fullmatch(line) else ""


def rst_lines(text: str) -> Iterator[Line]:
    """Every line of ``text`` in order as ``markdown_lines.Line``: blank, text, markup, or part of a title.

    A title's first line (its overline, else its text line) is ``HEADER`` and carries the ``Header``, which spans
    every line of the title; its other lines are ``SETEXT_UNDERLINE``. Lines that render no text (``rst_markup``: a
    comment, a directive's options, a navigation directive, a grid table's border, a field such as ``:orphan:``
    before the first title) are ``MARKUP``. ``\\r`` before ``\\n`` belongs to the line ending.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for raw in text.split("\n"):
        spans.append((start, start + len(raw) - (raw[-1:] == "\r")))
        start += len(raw) + 1
    bodies = [text[s:e] for s, e in spans]
    replace = substitutions(text) if "replace::" in text else {}
    styles: dict[tuple[str, bool], int] = {}
    block_start, titled, indented = True, False, False
    markup_over: int | None = None  # inside a markup block (a comment's, a navigation directive's): lines indented more
    options_over: int | None = None  # right under a directive: its option lines, indented more
    i = 0
    while i < len(spans):
        body = bodies[i]
        stripped = body.strip()
        indent = len(body) - len(body.lstrip(" \t"))
        kind = LineKind.TEXT
        if not stripped:
            yield Line(*spans[i], LineKind.BLANK, None)
            block_start, options_over, i = True, None, i + 1
            continue
        if markup_over is not None and indent <= markup_over:
            markup_over = None
        if options_over is not None and not (indent > options_over and OPTION.fullmatch(body)):
            options_over = None
        block_start = block_start or (indented and indent == 0)  # a block quote or a directive's body ended
        indented = indent > 0
        if markup_over is not None or options_over is not None:
            kind = LineKind.MARKUP
        elif block_start and (found := _title_at(bodies, i)) is not None:
            count, title, style = found
            level = min(styles.setdefault(style, len(styles) + 1), MAX_LEVEL)
            header = Header(level, shown_title(title, replace), spans[i][0], spans[i + count - 1][1])
            yield Line(*spans[i], LineKind.HEADER, header)
            for j in range(i + 1, i + count):
                yield Line(*spans[j], LineKind.SETEXT_UNDERLINE, None)
            block_start, titled, i = True, True, i + count
            continue
        elif stripped.startswith("..") and _EXPLICIT.match(stripped):
            markup = explicit_markup(stripped)
            kind = LineKind.TEXT if markup.text else LineKind.MARKUP
            markup_over, options_over = (indent, None) if markup.body_is_markup else (None, indent)
        elif GRID_BORDER.fullmatch(stripped) or (not titled and indent == 0 and _FIELD.fullmatch(stripped)):
            kind = LineKind.MARKUP
        yield Line(*spans[i], kind, None)
        # one line of explicit markup or a field is a block of its own: a title may follow right under it
        block_start = indent == 0 and (stripped.startswith("..") or _FIELD.fullmatch(stripped) is not None)
        i += 1


def _title_at(bodies: list[str], i: int) -> tuple[int, str, tuple[str, bool]] | None:
    """``(lines, title, style)`` of the title starting at line ``i`` (the start of a block), or None."""
    first = bodies[i]
    over = _adornment(first)
    if over:
        if i + 2 >= len(bodies) or not bodies[i + 1].strip() or _adornment(bodies[i + 1]):
            return None
        title = bodies[i + 1].strip()
        under = _adornment(bodies[i + 2])
        if under != over or (len(over) < len(title) and len(over) < 4):
            return None
        return 3, title, (over[0], True)
    if i + 1 >= len(bodies) or first[0].isspace() or _NOT_TITLE.match(first):
        return None
    under = _adornment(bodies[i + 1])
    title = first.rstrip()
    if not under or (len(under) < len(title) and len(under) < 4):
        return None
    return 2, title, (under[0], False)


def rst_headers(text: str) -> list[Header]:
    """The section titles of ``text`` in order."""
    return [line.header for line in rst_lines(text) if line.header is not None]


def rst_title(text: str) -> str:
    """The document's title: its one level-1 title, else ``""`` (the file's name is used). As docutils' ``doctitle``
    promotes only a lone top-level section: a page of several sections at the first level has no title of its own,
    and the first section's would be every chunk's title (as markdown without an h1 takes the file's name)."""
    first_level = [header.title for header in rst_headers(text) if header.level == 1]
    return first_level[0] if len(first_level) == 1 else ""
