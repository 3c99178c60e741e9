"""reStructuredText's explicit markup as retrieval needs it: which lines render no text, what a title reads as, and
which directive a piece of its body belongs to.

Explicit markup starts with ``..`` (docutils, "Explicit Markup Blocks"). Rendering no text: a comment (``..`` and
anything that is not one of the others) with its indented lines, a hyperlink target (``.. _name: url``), a
substitution definition (``.. |name| replace:: ...``), a directive's ``:option:`` lines, the line of a directive whose
argument is no text (``.. code-block:: python``, ``.. image:: a.png``, ``.. note::``), and the
whole of a navigation directive (``toctree``, ``autosummary``, ``contents``, ``index``, ``meta``), whose entries are
document names. A label (``.. _install:``) renders nothing either, but is an anchor (``rst_lines.LABEL_LINE``). An
object directive (``.. function:: bisect_left(a, x)``, ``.. variable:: CPACK_NAME``) names what its indented body
describes: a piece of that body cut from its directive line is led by the name (``directive_leads``). An autodoc
directive's target (``.. autofunction:: click.progressbar``) is text: its page's only words are those names, and a
question naming one found nothing but narrative pages (audit 59b).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

#: ``.. name:: argument`` (a domain may qualify the name: ``py:function``), on a stripped line
DIRECTIVE = re.compile(r"\.\.[ \t]+([\w:+.-]+)::(?:[ \t]+(.*))?")
#: a directive's option line, indented under it
OPTION = re.compile(r"[ \t]+:[\w -]+:(?:[ \t].*)?")
#: explicit markup that is no comment: a directive, a label or target (``_``), a footnote or citation (``[``), a
#: substitution definition (``|``)
_NOT_COMMENT = re.compile(r"\.\.[ \t]+(?:_|\[|\||[\w:+.-]+::)")
_TARGET = re.compile(r"\.\.[ \t]+(?:_[^:]*[^\\]:[ \t]+\S|__:)")
_SUBSTITUTION = re.compile(r"\.\.[ \t]+\|[^|]+\|")
#: a grid table's border or head separator, ``+----+----+`` / ``+====+``
GRID_BORDER = re.compile(r"\+(?:[-=]+\+)+")
#: directives whose whole body is navigation, no text: their entries are document names or index terms
_NAVIGATION = frozenset({"toctree", "autosummary", "contents", "index", "meta", "sectnum", "glossary-index"})
#: directives whose argument is no text (a language, a path, a module to document elsewhere, a format)
_NO_TEXT = frozenset({
    "code-block", "code", "sourcecode", "literalinclude", "include", "highlight", "image", "figure", "raw", "only",
    "currentmodule", "module", "py:module", "py:currentmodule", "default-role", "default-domain", "role",
    "tabularcolumns", "sectionauthor", "codeauthor", "moduleauthor", "cmake-module", "program", "graphviz", "plot",
    "mermaid", "tab-set", "grid",
})  # fmt: skip
#: directives whose argument is a remark, not the name of what the body describes
_REMARKS = frozenset({
    "note", "warning", "tip", "important", "caution", "danger", "error", "hint", "attention", "admonition",
    "seealso", "versionadded", "versionchanged", "deprecated", "topic", "sidebar", "rubric", "epigraph", "container",
    "testcode", "testoutput", "doctest", "testsetup", "ipython", "jupyter-execute", "dropdown", "csv-table",
    "list-table", "table", "math", "tab", "tab-item", "card",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Explicit:
    """How one explicit markup line reads: ``text`` (renders text), and whether its indented lines (``body``) or only
    its ``:option:`` lines render none."""

    text: bool
    body_is_markup: bool


def explicit_markup(stripped: str) -> Explicit:
    """How the explicit markup line ``stripped`` (it starts with ``..``) reads (see the module doc)."""
    directive = DIRECTIVE.fullmatch(stripped)
    if directive is not None:
        name, argument = directive[1].lower(), (directive[2] or "").strip()
        if name in _NAVIGATION:
            return Explicit(text=False, body_is_markup=True)
        return Explicit(text=bool(argument) and name not in _NO_TEXT, body_is_markup=False)
    if _TARGET.match(stripped) or _SUBSTITUTION.match(stripped):
        return Explicit(text=False, body_is_markup=True)
    if _NOT_COMMENT.match(stripped):  # a label (an anchor), a footnote or a citation
        return Explicit(text=True, body_is_markup=False)
    return Explicit(text=False, body_is_markup=True)  # a comment


def directive_leads(text: str) -> Callable[[int], str]:
    """``lead(offset)``: the argument of the object directive whose indented body holds ``offset`` (the innermost),
    else ``""``. An object directive has an argument and is no remark, navigation or argument-less kind."""
    starts: list[int] = []
    ends: list[int] = []
    names: list[str] = []
    parents: list[int] = []
    open_spans: list[tuple[int, int]] = []  # (indentation, index) of the bodies around the current line
    offset = 0
    for line in text.split("\n"):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" \t"))
        if stripped:
            while open_spans and indent <= open_spans[-1][0]:
                ends[open_spans.pop()[1]] = offset
            directive = DIRECTIVE.fullmatch(stripped)
            if directive is not None and _names_an_object(directive[1].lower(), directive[2] or ""):
                parents.append(open_spans[-1][1] if open_spans else -1)
                starts.append(offset + len(line))
                ends.append(len(text))
                names.append((directive[2] or "").strip())
                open_spans.append((indent, len(starts) - 1))
        offset += len(line) + 1

    def lead(at: int) -> str:
        index = bisect_right(starts, at) - 1
        while index >= 0 and ends[index] <= at:
            index = parents[index]
        return names[index] if index >= 0 else ""

    return lead


def _names_an_object(name: str, argument: str) -> bool:
    short = name.split(":")[-1]
    other_kind = {name, short} & (_NAVIGATION | _NO_TEXT | _REMARKS) or short.startswith("auto")
    return bool(argument.strip()) and not other_kind


_SUBSTITUTION_TEXT = re.compile(r"^\.\.[ \t]+\|([^|]+)\|[ \t]+replace::[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_ROLE = re.compile(r"(?::[\w:+.-]+:)?`([^`]+)`(?::[\w:+.-]+:)?_{0,2}")
_TARGET_IN_TEXT = re.compile(r"\s*<[^<>]*>$")
_STRONG = re.compile(r"(?<![\w*])\*\*(\S(?:.*?\S)?)\*\*(?![\w*])|(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])")
_REFERENCE_NAME = re.compile(r"(?<![\w\\])([A-Za-z0-9][\w.-]*?)__?(?=[\s.,;:!?)]|$)")
#: a substitution reference, ``|name|`` (``|name|_`` a link too)
SUBSTITUTION_REFERENCE = re.compile(r"\|([^|\s][^|]*)\|_{0,2}")
_INLINE_LITERAL = re.compile(r"``([^`]+)``")
_ESCAPE = re.compile(r"\\(.)")


def _role_text(text: str) -> str:
    """A role's shown text: ``!x`` shows ``x``, ``~a.b.c`` its last part ``c`` (Sphinx)."""
    if text.startswith("~"):
        return text[1:].rsplit(".", 1)[-1]
    return text.lstrip("!")


def substitutions(text: str) -> dict[str, str]:
    """The text's ``.. |name| replace:: text`` definitions (docutils allows them anywhere in the document)."""
    return {match[1]: match[2] for match in _SUBSTITUTION_TEXT.finditer(text)}


def shown_title(title: str, replace: dict[str, str]) -> str:
    """A title as rendered: ``\\`\\`code\\`\\``` as markdown's ``\\`code\\```, a role or reference by its text
    (``:mod:`!bisect``` reads ``bisect``, ```Sphinx <https://sphinx-doc.org>`_`` reads ``Sphinx``), emphasis
    unmarked, ``Title_`` as ``Title``, substitutions defined in the file replaced, backslash escapes read."""
    literals: list[str] = []

    def keep(match: re.Match[str]) -> str:
        literals.append(match[1])
        return f"\x00{len(literals) - 1}\x00"

    title = _INLINE_LITERAL.sub(keep, title.strip())
    title = _ROLE.sub(lambda m: _role_text(_TARGET_IN_TEXT.sub("", m[1])), title)
    title = _STRONG.sub(lambda m: m[1] or m[2], title)
    title = SUBSTITUTION_REFERENCE.sub(lambda m: replace.get(m[1], m[1]), title)
    title = _ESCAPE.sub(r"\1", _REFERENCE_NAME.sub(r"\1", title))
    return re.sub("\x00(\\d+)\x00", lambda m: f"`{literals[int(m[1])]}`", title)
