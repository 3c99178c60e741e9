"""PowerPoint (.pptx) files: each slide a section under its title, slides separated as a PDF's pages.

A slide is written as an ATX h1 line with its title (``Slide N`` when it has none), then the text of its other
shapes in reading order (top to bottom, then left to right; groups opened), one line per paragraph, indented two
spaces per outline level; a table one line per row, cells joined by `` | ``; a chart as ``Chart: <title>``,
``Axes: <titles>`` and a line per series, ``<series>: <category> <value>, ...``; a picture, or any shape without text
(a SmartArt diagram, an embedded object), as ``Image:`` and its alt text (title and description, unless that is a
file name or the shape's own name, ``Picture 3``); then its speaker notes after ``Notes:``. Footer, date,
slide-number and header placeholders are left out: they repeat on every slide. Lines that would read as a header
or a fence are escaped, as Word's are. Slides are joined by the PDF page break (``pdftext.PAGE_BREAK``), so a
chunk's ``page_start``/``page_end`` are its slide numbers. A hidden slide (not shown in the slide show, often a
backup or a superseded draft) is left out as an empty page, so the others keep their numbers.

Titles: the first slide shown, when it has no title, takes its top line as its heading (not ``Slide 1``): the text
of its first shape with text (in reading order; tables, charts, pictures, groups passed over) when that is one line of
at most ``TOP_LINE_CHARS`` characters, as a title set in a text box is. The deck's title is the package's core
title, unless that is a template's default (``PowerPoint Presentation``, ``Untitled presentation``), else the
first shown slide's heading, else the first slide title in the deck. Read with python-pptx, after
``ooxml.check_package``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import suppress
from io import BytesIO
from pathlib import Path
from typing import Any

from rag_service.ingest.formats.markdown_escape import escape_plain_line
from rag_service.ingest.formats.ooxml import PackageKind, read_package
from rag_service.ingest.formats.pdftext import PAGE_BREAK

#: a core title a template or an application left, not the author: PowerPoint's (in English, German, Dutch, French,
#: Spanish, Italian, Portuguese), an unsaved deck's name, Google Slides'
_TEMPLATE_TITLE = re.compile(
    r"(?:untitled )?presentation\d*|powerpoint[- ](?:presentation|präsentation|presentatie)|présentation powerpoint"
    r"|presentación de powerpoint|presentazione di powerpoint|apresentação do powerpoint",
    re.IGNORECASE,
)
#: the longest top line of an untitled first slide taken as its title
TOP_LINE_CHARS = 100
#: an alt text that is an image's file name (python-pptx and older PowerPoint write it there), no description
_FILE_NAME = re.compile(r".*\.(?:png|jpe?g|gif|bmp|tiff?|svg|emf|wmf|webp|heic|ico)", re.IGNORECASE)
#: what PowerPoint appends to an alt text it wrote itself
_GENERATED = re.compile(r"\s*Description automatically generated(?: with (?:low|medium|high) confidence)?$")


def read_pptx(path: Path, data: bytes, *, max_bytes: int) -> tuple[str, str]:
    """The text of the presentation ``data`` (see the module doc) and its title.

    Raises DocumentReadError for a file that is not a readable .pptx, or too large unpacked (``ooxml``).
    """
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    kind = PackageKind("PowerPoint presentation", ".pptx", "pptx", PackageNotFoundError, "no presentation inside")

    def read(stream: BytesIO) -> tuple[list[tuple[str, str] | None], str]:
        deck = Presentation(stream)
        slides: list[tuple[str, str] | None] = []
        for slide in deck.slides:
            hidden = slide._element.get("show") in ("0", "false")
            slides.append(None if hidden else _slide(slide, first=not any(slides)))
        title = (deck.core_properties.title or "").strip()
        return slides, "" if _TEMPLATE_TITLE.fullmatch(title) else title

    slides, title = read_package(path, data, kind, max_bytes=max_bytes, read=read)
    pages = []
    for number, shown in enumerate(slides, 1):
        if shown is None:  # hidden: an empty page, so the slides after it keep their numbers
            pages.append("")
            continue
        heading, body = shown
        page = f"# {heading or f'Slide {number}'}"
        pages.append(f"{page}\n\n{body}" if body else page)
    return PAGE_BREAK.join(pages), title or next((shown[0] for shown in slides if shown and shown[0]), "")


def _slide(slide: Any, *, first: bool) -> tuple[str, str]:
    """``(title, body)`` of one slide: its title's text (``""`` without one; the ``first`` slide shown may take its
    top line, ``_top_line``) and the rest as lines."""
    title_shape = slide.shapes.title
    heading = _one_line(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
    title_id = title_shape.shape_id if title_shape is not None else None  # proxies: compared by id, not identity
    shapes = [shape for shape in _reading_order(slide.shapes) if shape.shape_id != title_id and not _running(shape)]
    if first and not heading:
        heading, shapes = _top_line(shapes)
    blocks = ["\n".join(lines) for shape in shapes if (lines := list(_shape_lines(shape)))]
    if slide.has_notes_slide and (notes := slide.notes_slide.notes_text_frame) is not None:
        text = "\n".join(escape_plain_line(line.strip()) for line in _text(notes.text).split("\n") if line.strip())
        if text:
            blocks.append(f"Notes: {text}")
    return heading, "\n\n".join(blocks)


def _top_line(shapes: list[Any]) -> tuple[str, list[Any]]:
    """The heading an untitled first slide takes from ``shapes`` (in reading order), and the shapes left: the text
    of its first shape with text (a text box or placeholder; not a table, chart or picture) when that is one line of
    at most ``TOP_LINE_CHARS``, as a title set in a text box is; else ``""`` and all the shapes."""
    for at, shape in enumerate(shapes):
        if getattr(shape, "has_text_frame", False) and shape.has_text_frame and shape.text_frame.text.strip():
            lines = _text(shape.text_frame.text).strip().split("\n")
            if len(lines) == 1 and len(line := _one_line(lines[0])) <= TOP_LINE_CHARS:
                return line, shapes[:at] + shapes[at + 1 :]
            break
    return "", shapes


def _running(shape: Any) -> bool:
    """Whether ``shape`` is a footer, date, slide number or header placeholder: the same on every slide."""
    from pptx.enum.shapes import PP_PLACEHOLDER

    running = (PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.HEADER)
    return bool(shape.is_placeholder) and shape.placeholder_format.type in running


def _reading_order(shapes: Any) -> list[Any]:
    """``shapes`` top to bottom, then left to right (a placeholder without a position keeps its place)."""
    return sorted(shapes, key=lambda shape: (shape.top or 0, shape.left or 0))


def _shape_lines(shape: Any) -> list[str]:
    """The lines of one shape: its paragraphs, a table's rows, a group's shapes in reading order; for a shape
    without text (a picture, a diagram), its alt text as ``Image: ...``."""
    lines = list(_content_lines(shape))
    if not lines and (alt := _alt_text(shape)):
        lines.append(escape_plain_line(f"Image: {alt}"))
    return lines


def _content_lines(shape: Any) -> Iterator[str]:
    if getattr(shape, "shapes", None) is not None:  # a group
        for inner in _reading_order(shape.shapes):
            yield from _shape_lines(inner)
        return
    if getattr(shape, "has_table", False) and shape.has_table:
        for row in shape.table.rows:
            cells = [_one_line(cell.text) for cell in row.cells]
            if any(cells):
                yield escape_plain_line(" | ".join(cells))
        return
    if getattr(shape, "has_chart", False) and shape.has_chart:
        with suppress(KeyError, TypeError, ValueError):  # its part missing or damaged: what was read, if any
            yield from (escape_plain_line(line) for line in _chart_lines(shape.chart))
        return
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        for paragraph in shape.text_frame.paragraphs:
            for line in _text(paragraph.text).split("\n"):
                if line.strip():
                    yield "  " * paragraph.level + escape_plain_line(line.strip())


def _chart_lines(chart: Any) -> Iterator[str]:
    """A chart as ``Chart: <title>``, ``Axes: <category axis>, <value axis>`` (titles, where it has them), and a
    line per series, ``<name>: <category> <value>, ...``: each number beside its category and series, which a
    keyword search matches and a reader takes in without looking up a header."""
    if title := _title_of(chart, "chart_title"):
        yield f"Chart: {title}"
    axes = []
    for name in ("category_axis", "value_axis"):
        with suppress(ValueError):  # a pie or doughnut chart has no axes
            axes.append(_title_of(getattr(chart, name), "axis_title"))
    if any(axes):
        yield f"Axes: {', '.join(axis for axis in axes if axis)}"
    # the series from the XML: python-pptx reads no 3-D, stock or surface chart, and its values raise on a point a
    # worksheet left as #N/A (left out here, as a point without a value is)
    for series in chart._chartSpace.xpath("c:chart/c:plotArea/*/c:ser"):
        labels = _categories(series)
        points = []
        for at, value in _points(series, "c:val//c:pt | c:yVal//c:pt").items():
            with suppress(ValueError):
                points.append(f"{labels.get(at, '')} {float(value):.15g}".lstrip())  # an XY chart has no categories
        if points:
            name = _one_line(series.xpath("string(c:tx//c:v)"))
            yield f"{name}: {', '.join(points)}" if name else ", ".join(points)


def _categories(series: Any) -> dict[int, str]:
    """The category of each point of a chart's ``series`` by index; on a multi-level axis its labels, parent first
    (``2024 Q1``): a parent level's label stands at the first index of its group."""
    levels = [_points(level, "c:pt") for level in series.xpath("c:cat//c:lvl")] or [_points(series, "c:cat//c:pt")]
    labels = {}
    for at, label in levels[0].items():
        groups = [level[max(starts)] for level in reversed(levels[1:]) if (starts := [i for i in level if i <= at])]
        labels[at] = " ".join([*groups, label])
    return labels


def _points(element: Any, path: str) -> dict[int, str]:
    """Index -> value text of the ``c:pt`` elements at ``path`` in a chart's XML ``element``."""
    return {int(point.get("idx")): _one_line(point.xpath("string(c:v)")) for point in element.xpath(path)}


def _title_of(owner: Any, title: str) -> str:
    """The text of a chart's or an axis's title, ``""`` without one (``has_title`` first: python-pptx adds a title
    to the XML it is asked for)."""
    if not owner.has_title or not (found := getattr(owner, title)).has_text_frame:
        return ""
    return _one_line(found.text_frame.text)


def _alt_text(shape: Any) -> str:
    """The alt text of ``shape``: its title and description, without PowerPoint's note on a description it
    guessed, and not an image's file name or the shape's own name (``Picture 3``)."""
    found = shape._element.xpath("./*[1]/p:cNvPr")  # the shape's non-visual properties
    parts: list[str] = []
    for name in ("title", "descr"):
        text = _GENERATED.sub("", _one_line(found[0].get(name) or "")) if found else ""
        if text and text != shape.name and not _FILE_NAME.fullmatch(text) and text not in parts:
            parts.append(text)
    return ": ".join(parts)


def _text(text: str) -> str:
    """python-pptx's text with its line breaks (a vertical tab for ``<a:br>``) as newlines."""
    return text.replace("\v", "\n").replace("\r", "\n")


def _one_line(text: str) -> str:
    return " ".join(_text(text).split())
