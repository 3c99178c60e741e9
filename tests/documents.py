"""Test documents in binary formats, generated on the spot: PDFs (text, scanned, encrypted, with headings), Word and
PowerPoint files."""

from __future__ import annotations

import copy
import json
from io import BytesIO
from pathlib import Path


def make_pdf(
    path: Path,
    pages: list[str],
    *,
    title: str = "",
    scanned: bool = False,
    password: str = "",
    header: str = "",
    footer: str = "",
) -> Path:
    """A PDF with one page per string (a text layer), or only drawn shapes (``scanned``), maybe encrypted; a
    ``header`` and ``footer`` line on every page (``{page}`` in them is the page number)."""
    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    doc = FPDF()
    if title:
        doc.set_title(title)
    doc.set_font("helvetica", size=11)
    for number, text in enumerate(pages, 1):
        doc.add_page()
        if header:
            doc.cell(0, 8, header.format(page=number), new_x="LMARGIN", new_y="NEXT")
        if scanned:  # what a scan is to a text extractor: an image, no text
            doc.rect(10, 10, 120, 60, style="F")
        else:
            doc.multi_cell(0, 6, text)
        if footer:  # at the foot of the page, written last, as FPDF.footer() does
            doc.set_auto_page_break(False)
            doc.set_y(-15)
            doc.cell(0, 8, footer.format(page=number))
            doc.set_auto_page_break(True, margin=20)
    if password:
        doc.set_encryption(owner_password="owner", user_password=password, encryption_method=EncryptionMethod.RC4)
    doc.output(str(path))
    return path


#: font sizes of ``make_structured_pdf``'s blocks: two heading levels clearly larger than the body
PDF_SIZES = {"h1": 20, "h2": 15, "p": 11}


def make_structured_pdf(
    path: Path, pages: list[list[tuple[str, str]]], *, outline: bool = False, sizes: dict[str, int] | None = None
) -> Path:
    """A PDF with one page per list of ``(kind, text)`` blocks: ``h1``/``h2`` headings and ``p`` paragraphs set
    in ``sizes`` (``PDF_SIZES``); with ``outline`` each heading is a bookmark of its level too. A ``b1``/``b2``
    block is a bookmark of that level alone, its text nowhere on the page."""
    from fpdf import FPDF

    sizes = PDF_SIZES if sizes is None else sizes
    doc = FPDF()
    for blocks in pages:
        doc.add_page()
        for kind, text in blocks:
            if kind.startswith("b") or (outline and kind.startswith("h")):
                doc.start_section(text, level=int(kind[1:]) - 1)
            if kind.startswith("b"):
                continue
            doc.set_font("helvetica", size=sizes[kind])
            doc.multi_cell(0, sizes[kind] * 0.6, text, new_x="LMARGIN", new_y="NEXT")
    doc.output(str(path))
    return path


def make_docx(path: Path, blocks: list[tuple[str, str]], *, title: str = "") -> Path:
    """A Word file from ``(kind, text)`` blocks: ``h1``..``h6``, ``p``, or ``table`` (rows by ``;``, cells by ``,``)."""
    import docx

    document = docx.Document()
    if title:
        document.core_properties.title = title
    for kind, text in blocks:
        if kind.startswith("h"):
            document.add_heading(text, int(kind[1:]))
        elif kind == "table":
            rows = [row.split(",") for row in text.split(";")]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
        else:
            document.add_paragraph(text)
    document.save(str(path))
    return path


def make_pptx(path: Path, slides: list[dict[str, object]], *, title: str = "") -> Path:
    """A PowerPoint file, one slide per dict: ``title`` (str), ``bullets`` (``(level, text)`` pairs, in a text box
    below the title), ``table`` (rows of cells), ``group`` (texts of boxes grouped together), ``notes`` (str),
    ``footer`` (str: the footer, with a date and the slide's number, in the layout's placeholders, as PowerPoint's
    Header & Footer puts them), ``hidden`` (true: a hidden slide), ``chart`` (a dict: ``categories`` (a list, or a
    dict of parent -> its list for two levels), ``series`` (name -> values), and maybe ``title``, ``axes`` (the
    category and value axes' titles) and ``kind`` (an ``XL_CHART_TYPE`` name, clustered columns by default)),
    ``picture`` (a picture, below the rest, with this alt text: a description, or a ``(title, description)`` pair;
    ``""`` leaves python-pptx's, the image's file name)."""
    from PIL import Image
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.enum.shapes import PP_PLACEHOLDER
    from pptx.util import Inches

    deck = Presentation()
    if title:
        deck.core_properties.title = title
    for number, spec in enumerate(slides, 1):
        slide = deck.slides.add_slide(deck.slide_layouts[5 if spec.get("title") else 6])  # title only / blank
        if spec.get("title"):
            slide.shapes.title.text = str(spec["title"])
        top = Inches(2)
        if bullets := spec.get("bullets"):
            frame = slide.shapes.add_textbox(Inches(1), top, Inches(8), Inches(2)).text_frame
            for i, (level, text) in enumerate(bullets):  # type: ignore[misc, attr-defined]
                paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
                paragraph.text, paragraph.level = text, level
            top += Inches(2)
        if rows := spec.get("table"):
            rows = list(rows)  # type: ignore[call-overload]
            table = slide.shapes.add_table(len(rows), len(rows[0]), Inches(1), top, Inches(8), Inches(1)).table
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
            top += Inches(1.5)
        if texts := spec.get("group"):
            group = slide.shapes.add_group_shape()
            for i, text in enumerate(texts):  # type: ignore[arg-type]
                group.shapes.add_textbox(Inches(1 + 3 * i), top, Inches(2), Inches(1)).text_frame.text = text
        if isinstance(chart := spec.get("chart"), dict):
            data = CategoryChartData()
            if isinstance(chart["categories"], dict):  # two levels: parent -> its categories
                for parent, children in chart["categories"].items():
                    group = data.add_category(parent)
                    for child in children:
                        group.add_sub_category(child)
            else:
                data.categories = chart["categories"]
            for name, values in chart["series"].items():
                data.add_series(name, values)
            kind = XL_CHART_TYPE[chart.get("kind", "COLUMN_CLUSTERED")]
            made = slide.shapes.add_chart(kind, Inches(1), top, Inches(6), Inches(3), data).chart
            if chart.get("title"):
                made.has_title = True
                made.chart_title.text_frame.text = chart["title"]
            if axes := chart.get("axes"):
                for axis, text in zip((made.category_axis, made.value_axis), axes, strict=True):
                    axis.has_title = True
                    axis.axis_title.text_frame.text = text
            top += Inches(3.5)
        if (alt := spec.get("picture")) is not None:
            image = BytesIO()
            Image.new("RGB", (40, 20), "white").save(image, "PNG")
            picture = slide.shapes.add_picture(image, Inches(1), top, Inches(2))
            alt_title, description = alt if isinstance(alt, tuple) else ("", alt)
            for name, value in (("title", alt_title), ("descr", description)):
                if value:
                    picture._element.nvPicPr.cNvPr.set(name, value)
        if footer := spec.get("footer"):
            running = {PP_PLACEHOLDER.DATE: "March 2024", PP_PLACEHOLDER.FOOTER: footer}
            running[PP_PLACEHOLDER.SLIDE_NUMBER] = number
            for placeholder in slide.slide_layout.placeholders:
                if (text := running.get(placeholder.placeholder_format.type)) is not None:
                    slide.shapes._spTree.append(copy.deepcopy(placeholder._element))
                    slide.placeholders[placeholder.placeholder_format.idx].text_frame.text = str(text)
        if notes := spec.get("notes"):
            slide.notes_slide.notes_text_frame.text = str(notes)
        if spec.get("hidden"):
            slide._element.set("show", "0")
    deck.save(str(path))
    return path


def make_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    """A minimal nbformat-4 notebook from ``(cell_type, source)`` pairs, with an output to ignore."""
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "cells": [
            {
                "cell_type": kind,
                "metadata": {},
                "source": source.splitlines(keepends=True),
                **({"outputs": [{"output_type": "stream", "text": ["OUTPUT-NOT-INDEXED\n"]}], "execution_count": 1}
                   if kind == "code" else {}),
            }
            for kind, source in cells
        ],
    }  # fmt: skip
    path.write_text(json.dumps(notebook, indent=1))
    return path


def make_docx_xml(path: Path, body: list[str], *, footnotes: dict[int, str] | None = None) -> Path:
    """A Word file whose body is the raw WordprocessingML elements ``body`` (``w:`` and ``mc:`` prefixes
    declared), with a footnotes part holding ``footnotes`` (id -> text) if given."""
    import docx
    from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    namespaces = (
        'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" xmlns:v="urn:schemas-microsoft-com:vml"'
    )
    document = docx.Document()
    section = document.element.body[-1]  # w:sectPr stays last
    for element in body:
        tag = element[1 : element.index(" ") if " " in element[:12] else element.index(">")]
        section.addprevious(parse_xml(element.replace(f"<{tag}", f"<{tag} {namespaces}", 1)))
    if footnotes is not None:
        note = '<w:footnote w:id="{}"><w:p><w:r><w:t>{}</w:t></w:r></w:p></w:footnote>'
        notes = "".join(note.format(n, t) for n, t in footnotes.items())
        blob = f"<w:footnotes {namespaces}>{notes}</w:footnotes>".encode()
        part = Part(PackURI("/word/footnotes.xml"), CONTENT_TYPE.WML_FOOTNOTES, blob, document.part.package)
        document.part.relate_to(part, RELATIONSHIP_TYPE.FOOTNOTES)
    document.save(str(path))
    return path
