"""The body of a Word document as text blocks, read from its XML rather than python-docx's paragraph API.

python-docx's ``paragraph.text`` and ``cell.text`` skip content controls (``w:sdt``), tracked insertions
(``w:ins``), text boxes and nested tables, and ``row.cells`` repeats a merged cell once per grid column;
so the body is walked here: every ``w:t`` of a paragraph (deleted text is ``w:delText``, not kept), text
boxes after their paragraph, nested tables inside their cell, each ``w:tc`` once. Footnote and endnote
references become ``[n]`` markers and the notes a final "Footnotes" / "Endnotes" section; list
paragraphs get a ``-`` or ``n.`` marker indented by their level.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from docx.oxml.ns import qn

from rag_service.ingest.formats.markdown_escape import escape_plain_line

__all__ = ["body_blocks"]

_HEADING = re.compile(r"heading\s*(\d)", re.IGNORECASE)
_LIST_STYLE_LEVEL = re.compile(r"list\b.*\s([2-9])$", re.IGNORECASE)
_W_T, _W_TAB, _W_BR, _W_CR = qn("w:t"), qn("w:tab"), qn("w:br"), qn("w:cr")
_W_NO_BREAK_HYPHEN = qn("w:noBreakHyphen")  # Word's Ctrl+Shift+-: a hyphen shown ("555-0199", "e-mail")
_W_P, _W_TBL, _W_SDT, _W_TC, _W_TR = qn("w:p"), qn("w:tbl"), qn("w:sdt"), qn("w:tc"), qn("w:tr")
_W_TXBX = qn("w:txbxContent")
_W_FOOTREF, _W_ENDREF = qn("w:footnoteReference"), qn("w:endnoteReference")
_W_VAL, _W_ID = qn("w:val"), qn("w:id")
_MC_ALTERNATE = "{http://schemas.openxmlformats.org/markup-compatibility/2006}AlternateContent"
#: subtrees whose text is not the document's current text (deleted or moved away), or is read elsewhere
_NOT_INLINE = frozenset({qn("w:del"), qn("w:moveFrom"), _W_TXBX, qn("w:sdtPr"), qn("w:rPr"), qn("w:pPr")})
_NOTES = {"footnotes": ("Footnotes", "w:footnote"), "endnotes": ("Endnotes", "w:endnote")}


@dataclass(slots=True)
class _Walk:
    """What the walk over one document carries: style names, list formats and counters, cited notes."""

    styles: dict[str, tuple[str, Any]]  # style id -> (name, its numPr element or None)
    formats: dict[tuple[str, int], str]  # (numId, level) -> numFmt
    counters: dict[tuple[str, int], int] = field(default_factory=dict)
    cited: dict[str, list[str]] = field(default_factory=lambda: {"footnotes": [], "endnotes": []})


def body_blocks(document: Any) -> tuple[list[str], list[str]]:
    """The blocks of ``document`` (a python-docx Document): header lines, paragraphs, one block per table;
    and the blocks of its notes section (``[]`` if it cites none)."""
    walk = _Walk(_style_table(document), _list_formats(document))
    blocks = [b for b in _blocks(document.element.body, walk) if b.strip()]
    notes = _note_parts(document)
    tail: list[str] = []
    for kind, (heading, tag) in _NOTES.items():
        texts = {n.get(_W_ID): n for n in notes[kind].iter(qn(tag))} if kind in notes else {}
        lines = [f"[{i}] {_inline_text(texts[n], walk)}" for i, n in enumerate(walk.cited[kind], 1) if n in texts]
        if lines:
            tail += [f"# {heading}", "\n".join(lines)]
    return blocks, tail


def _blocks(container: Any, walk: _Walk) -> Iterator[str]:
    for child in container.iterchildren():
        if child.tag == _W_P:
            yield from _paragraph(child, walk)
        elif child.tag == _W_TBL:
            rows = [escape_plain_line(row) for row in _table_rows(child, walk) if row.strip(" |")]
            if rows:
                yield "\n".join(rows)
        elif child.tag == _W_SDT:  # a block-level content control: its paragraphs and tables
            for content in child.iterchildren(qn("w:sdtContent")):
                yield from _blocks(content, walk)


def _paragraph(p: Any, walk: _Walk) -> Iterator[str]:
    text = _inline_text(p, walk)
    if text:
        style = p.find(f"{qn('w:pPr')}/{qn('w:pStyle')}")
        name, style_numbering = walk.styles.get(style.get(_W_VAL) if style is not None else "", ("", None))
        if level := _heading_level(name):
            yield f"{'#' * level} {text}"
        else:
            yield _list_marker(p, name, style_numbering, walk) + escape_plain_line(text)
    for box in _text_boxes(p):  # a text box's paragraphs after the paragraph it is anchored in
        yield from _blocks(box, walk)


def _inline_text(element: Any, walk: _Walk) -> str:
    """The visible text of ``element``, whitespace collapsed, note references as ``[n]``."""
    parts: list[str] = []

    def visit(node: Any) -> None:
        for child in node.iterchildren():
            tag = child.tag
            if tag == _W_T:
                parts.append(child.text or "")
            elif tag in (_W_TAB, _W_BR, _W_CR):
                parts.append(" ")
            elif tag == _W_NO_BREAK_HYPHEN:
                parts.append("-")
            elif tag in (_W_FOOTREF, _W_ENDREF):
                cited = walk.cited["footnotes" if tag == _W_FOOTREF else "endnotes"]
                cited.append(child.get(_W_ID))
                parts.append(f"[{len(cited)}]")
            elif tag == _MC_ALTERNATE:  # one rendering of the same content (Choice, else Fallback)
                first = next(iter(child.iterchildren()), None)
                if first is not None:
                    visit(first)
            elif tag in (_W_P, _W_TBL):  # paragraphs inside a note or a cell: words apart
                parts.append(" ")
                visit(child)
            elif tag not in _NOT_INLINE and isinstance(tag, str):
                visit(child)

    visit(element)
    return " ".join("".join(parts).split())


def _text_boxes(p: Any) -> Iterator[Any]:
    """The outermost text boxes in ``p``, one per ``mc:AlternateContent`` (its first rendering)."""
    stack = [p]
    while stack:
        node = stack.pop()
        for child in reversed(list(node.iterchildren())):
            if child.tag == _W_TXBX:
                yield child
            elif child.tag == _MC_ALTERNATE:
                stack.extend(list(child.iterchildren())[:1])
            elif isinstance(child.tag, str) and child.tag not in (qn("w:del"), qn("w:moveFrom")):
                stack.append(child)


def _table_rows(tbl: Any, walk: _Walk) -> list[str]:
    """One line per row, cells joined by `` | ``; each ``w:tc`` once (a merged cell spans, not repeats); a cell
    continuing a vertical merge is left out; a nested table is kept in its cell, rows joined by ``; ``."""
    rows: list[str] = []
    for tr in tbl.iterchildren(_W_TR):
        cells = []
        for tc in _row_cells(tr):
            merge = tc.find(f"{qn('w:tcPr')}/{qn('w:vMerge')}")
            if merge is not None and merge.get(_W_VAL) != "restart":
                continue
            cells.append(_cell_text(tc, walk))
        rows.append(" | ".join(cells))
    return rows


def _row_cells(tr: Any) -> Iterator[Any]:
    for child in tr.iterchildren():
        if child.tag == _W_TC:
            yield child
        elif child.tag == _W_SDT:  # a content control around cells
            for content in child.iterchildren(qn("w:sdtContent")):
                yield from _row_cells(content)


def _cell_text(tc: Any, walk: _Walk) -> str:
    parts: list[str] = []
    for child in tc.iterchildren():
        if child.tag == _W_TBL:
            parts.append("; ".join(r for r in _table_rows(child, walk) if r.strip(" |")))
        elif child.tag in (_W_P, _W_SDT):
            parts.append(_inline_text(child, walk))
            parts.extend(_inline_text(box, walk) for box in _text_boxes(child))
    return " ".join(" ".join(parts).split())


def _list_marker(p: Any, style: str, style_numbering: Any, walk: _Walk) -> str:
    """``- `` or ``n. ``, indented two spaces a level, for a list paragraph (numbering of its own or its style's;
    without a level of its own, "List Bullet 2" is level 1, as Word's built-in list styles indent)."""
    numbering = p.find(f"{qn('w:pPr')}/{qn('w:numPr')}")
    if numbering is None:
        numbering = style_numbering
    if numbering is None:
        return ""
    num_id = numbering.find(qn("w:numId"))
    ilvl = numbering.find(qn("w:ilvl"))
    styled = _LIST_STYLE_LEVEL.match(style)
    level = int(ilvl.get(_W_VAL) or 0) if ilvl is not None else int(styled[1]) - 1 if styled else 0
    key = (num_id.get(_W_VAL) if num_id is not None else "", level)
    if key[0] in ("", "0"):  # numId 0 switches the numbering off
        return ""
    for deeper in [k for k in walk.counters if k[0] == key[0] and k[1] > key[1]]:
        del walk.counters[deeper]  # a sub-list restarts under each new item
    fmt = walk.formats.get(key, "bullet")
    if fmt in ("bullet", "none"):
        return "  " * key[1] + "- "
    walk.counters[key] = walk.counters.get(key, 0) + 1
    return "  " * key[1] + f"{walk.counters[key]}. "


def _style_table(document: Any) -> dict[str, tuple[str, Any]]:
    table: dict[str, tuple[str, Any]] = {}
    for style in document.styles:
        ppr = style.element.find(qn("w:pPr"))
        numbering = ppr.find(qn("w:numPr")) if ppr is not None else None
        table[style.style_id] = (style.name or "", numbering)
    return table


def _list_formats(document: Any) -> dict[tuple[str, int], str]:
    """``(numId, level) -> numFmt`` from the numbering part (``{}`` if the document has none)."""
    try:
        numbering = document.part.numbering_part.element
    except (KeyError, NotImplementedError):
        return {}
    abstract = {
        a.get(qn("w:abstractNumId")): {
            int(lvl.get(qn("w:ilvl")) or 0): (fmt.get(_W_VAL) if (fmt := lvl.find(qn("w:numFmt"))) is not None else "")
            for lvl in a.iterchildren(qn("w:lvl"))
        }
        for a in numbering.iterchildren(qn("w:abstractNum"))
    }
    formats: dict[tuple[str, int], str] = {}
    for num in numbering.iterchildren(qn("w:num")):
        ref = num.find(qn("w:abstractNumId"))
        levels = abstract.get(ref.get(_W_VAL) if ref is not None else None, {})
        formats.update({(num.get(qn("w:numId")), level): fmt for level, fmt in levels.items()})
    return formats


def _note_parts(document: Any) -> dict[str, Any]:
    """The parsed footnotes and endnotes parts of ``document``, by kind."""
    from docx.oxml.parser import parse_xml

    found: dict[str, Any] = {}
    for rel in document.part.rels.values():
        kind = rel.reltype.rsplit("/", 1)[-1]
        if kind in _NOTES and not rel.is_external:
            found[kind] = parse_xml(rel.target_part.blob)
    return found


def _heading_level(style: str) -> int:
    if style.lower() == "title":
        return 1
    match = _HEADING.match(style)
    return min(max(int(match[1]), 1), 6) if match else 0
