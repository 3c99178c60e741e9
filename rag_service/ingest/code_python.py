"""The definitions of a Python module for the ``code`` strategy, from ``ast``.

Functions and classes, with their decorators, with the ``#`` comment lines right above them (no blank line
between), and with the comment lines after their last statement that are indented as their body. Definitions
inside top-level compound statements (``if``/``elif``/``else``, ``try``/``except``/``finally``, ``with``: platform
switches, ``TYPE_CHECKING`` blocks, import fallbacks) are definitions too; a definition that is the first statement
of such a block leads with the block's header line. A class's methods are its children; a function's nested
definitions are not (a function is kept whole, or split as a whole).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from rag_service.ingest.code_lines import Definition, Lines, comment_body_end, indent_width, lead_start, line_end

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: the compound statements whose bodies are searched for definitions
_BLOCKS = (ast.If, ast.Try, ast.TryStar, ast.With, ast.AsyncWith)


def python_definitions(text: str) -> list[Definition] | None:
    """The module's top-level definitions (see the module doc); None when ``text`` does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _body(tree.body, Lines(text), header=None)


def _body(body: list[ast.stmt], lines: Lines, header: int | None) -> list[Definition]:
    """The definitions of a statement list; ``header``: where its first statement's lead may start."""
    found: list[Definition] = []
    for i, node in enumerate(body):
        first_header = header if i == 0 else None
        if isinstance(node, _DEFINITIONS):
            found.append(_definition(node, lines, first_header))
        elif isinstance(node, _BLOCKS):
            for part_header, part in _parts(node, lines):
                found.extend(_body(part, lines, part_header if first_header is None else first_header))
                first_header = None
    return found


def _definition(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, lines: Lines, header: int | None
) -> Definition:
    text = lines.text
    start = lines.offset(min([node.lineno, *(d.lineno for d in node.decorator_list)]))
    lead = lead_start(text, start, lambda s, e: s if text[s:e].lstrip(" \t").startswith("#") else None)
    first = text[start : line_end(text, start)]
    end = comment_body_end(text, lines.offset((node.end_lineno or node.lineno) + 1), indent_width(first))
    children = _body(node.body, lines, header=None) if isinstance(node, ast.ClassDef) else []
    return Definition(lead if header is None else min(lead, header), start, end, (node.name,), children)


def _parts(node: ast.stmt, lines: Lines) -> Iterator[tuple[int, list[ast.stmt]]]:
    """A compound statement's statement lists, each with the start of the line that opens it (``else:`` and
    ``finally:`` have no line in the tree: the line after the previous list's last statement)."""
    if isinstance(node, ast.Try | ast.TryStar):
        parts = [(node.lineno, node.body), *((h.lineno, h.body) for h in node.handlers)]
        parts += [(0, node.orelse), (0, node.finalbody)]
    elif isinstance(node, ast.If):
        parts = [(node.lineno, node.body), (0, node.orelse)]
    else:  # with, async with
        parts = [(node.lineno, getattr(node, "body", []))]
    previous = node.lineno
    for line, statements in parts:
        if statements:
            yield lines.offset(line or previous + 1), statements
            previous = statements[-1].end_lineno or statements[-1].lineno
