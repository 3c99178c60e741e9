"""Word files: every piece of the body's text is indexed (content controls, tracked insertions, text boxes,
nested tables, footnotes), merged cells once, lists with their markers."""

from __future__ import annotations

from pathlib import Path

from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.loaders import load_document
from tests.documents import make_docx, make_docx_xml
from tests.unit.test_chunker_properties import assert_chunks_valid

MB = 1_000_000


def _run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


def _text(path: Path) -> str:
    doc = load_document(path, max_bytes=MB)
    chunked = make_chunker("markdown", chunk_size=120, chunk_overlap=0, min_chunk_chars=0).split(doc.text)
    assert_chunks_valid(doc.text, chunked)
    return doc.text


def test_content_controls_insertions_links_and_text_boxes_are_kept(tmp_path: Path) -> None:
    box = f"<w:txbxContent><w:p>{_run('Never disturb a nest, fine 5000 euros.')}</w:p></w:txbxContent>"
    path = make_docx_xml(
        tmp_path / "guide.docx",
        [
            "<w:sdt><w:sdtPr><w:alias w:val='Summary'/></w:sdtPr>"
            f"<w:sdtContent><w:p>{_run('The colony had 412 nests.')}</w:p></w:sdtContent></w:sdt>",
            f"<w:p>{_run('Herons return in ')}<w:ins w:id='1' w:author='x'>{_run('late March')}</w:ins>"
            f"<w:del w:id='2' w:author='x'><w:r><w:delText>early May</w:delText></w:r></w:del>{_run('.')}</w:p>",
            f"<w:p>{_run('See the ')}<w:hyperlink w:anchor='x'>{_run('ringing database')}</w:hyperlink>"
            f"{_run(' now.')}</w:p>",
            f"<w:p><w:r><mc:AlternateContent><mc:Choice Requires='wps'><w:drawing>{box}</w:drawing></mc:Choice>"
            f"<mc:Fallback><w:pict><v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict></mc:Fallback>"
            "</mc:AlternateContent></w:r></w:p>",
            f"<w:p>{_run('Inline control: ')}"
            f"<w:sdt><w:sdtContent>{_run('ringed 37 chicks')}</w:sdtContent></w:sdt></w:p>",
        ],
    )
    assert _text(path) == (
        "The colony had 412 nests.\n\nHerons return in late March.\n\nSee the ringing database now.\n\n"
        "Never disturb a nest, fine 5000 euros.\n\nInline control: ringed 37 chicks"
    )  # the text box once, though Word writes it twice (DrawingML and a VML fallback)


def test_nested_tables_are_kept_and_merged_cells_written_once(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    table = document.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 2)).text = "Spanning header"
    for column, text in enumerate("xyz"):
        table.cell(1, column).text = text
    outer = document.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "Outer cell"
    inner = outer.cell(0, 1).add_table(rows=2, cols=2)
    for (row, column), text in zip([(0, 0), (0, 1), (1, 0), (1, 1)], ["vault", "31-41-59", "safe", "7"], strict=True):
        inner.cell(row, column).text = text
    tall = document.add_table(rows=2, cols=2)
    tall.cell(0, 0).merge(tall.cell(1, 0)).text = "Tall"
    tall.cell(0, 1).text, tall.cell(1, 1).text = "top", "bottom"
    document.save(str(path := tmp_path / "tables.docx"))
    assert _text(path) == (
        "Spanning header\nx | y | z\n\nOuter cell | vault | 31-41-59; safe | 7\n\nTall | top\nbottom"
    )


def test_footnotes_are_marked_and_kept_in_a_final_section(tmp_path: Path) -> None:
    path = make_docx_xml(
        tmp_path / "lab.docx",
        [
            "<w:p><w:pPr><w:pStyle w:val='Heading1'/></w:pPr><w:r><w:t>Storage</w:t></w:r></w:p>",
            f"<w:p>{_run('Acids go in cabinet C.')}<w:r><w:footnoteReference w:id='5'/></w:r>"
            f"{_run(' Bases in D.')}<w:r><w:footnoteReference w:id='2'/></w:r></w:p>",
        ],
        footnotes={2: "Bases are kept dry.", 5: "Neutralise with sodium bicarbonate."},
    )
    doc = load_document(path, max_bytes=MB)
    assert doc.title == "Storage"  # not the notes section's heading
    assert _text(path) == (
        "# Storage\n\nAcids go in cabinet C.[1] Bases in D.[2]\n\n"
        "# Footnotes\n\n[1] Neutralise with sodium bicarbonate.\n[2] Bases are kept dry."
    )


def test_lists_keep_their_markers_and_levels(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("Helmets", style="List Bullet")
    document.add_paragraph("Chin straps", style="List Bullet 2")
    document.add_paragraph("Power down", style="List Number")
    document.add_paragraph("Wait ninety seconds", style="List Number")
    document.save(str(path := tmp_path / "lists.docx"))
    assert _text(path) == "- Helmets\n\n  - Chin straps\n\n1. Power down\n\n2. Wait ninety seconds"


def test_plain_documents_read_as_before(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "plain.docx", [("h1", "Guide"), ("p", "Body text."), ("table", "a,b;c,d")])
    assert _text(path) == "# Guide\n\nBody text.\n\na | b\nc | d"


def test_a_docx_unpacking_past_the_limit_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    """A 131 KB .docx held 34 MB of XML that became 27 million characters: the file limit alone let it through."""
    import zipfile

    import pytest

    from rag_service.errors import DocumentReadError

    paragraph = "<w:p>" + _run("lorem ipsum dolor sit amet " * 5) + "</w:p>"
    path = make_docx_xml(tmp_path / "packed.docx", [paragraph] * 5000)
    with zipfile.ZipFile(path) as archive:
        unpacked = sum(info.file_size for info in archive.infolist())
    limit = unpacked // 6
    assert path.stat().st_size < limit, "precondition: the file is within the limit, its parts are not"
    with pytest.raises(DocumentReadError) as refused:
        load_document(path, max_bytes=limit)
    assert str(refused.value) == (
        f"{path} unpacks to {unpacked:,} bytes, over 5 x the limit of {limit:,} bytes (RAG_MAX_FILE_BYTES); "
        "set it higher to index it"
    )

    text = load_document(path, max_bytes=unpacked).text  # its text, past a limit its parts are within
    with pytest.raises(DocumentReadError, match=f"holds {len(text):,} characters of text, over the limit of"):
        load_document(path, max_bytes=len(text) - 1)


def _empty_paragraphs(path: Path, count: int) -> Path:
    """A minimal Word package: one paragraph of text, then ``count`` empty ones (``<w:p/>``, 6 bytes each)."""
    import zipfile

    package = "http://schemas.openxmlformats.org/package/2006"
    main = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    office = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            f'<Types xmlns="{package}/content-types"><Default Extension="rels" ContentType="application/'
            'vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/word/document.xml" ContentType="{main}"/></Types>',
        )
        archive.writestr(
            "_rels/.rels",
            f'<Relationships xmlns="{package}/relationships"><Relationship Id="rId1" Type="{office}" '
            'Target="word/document.xml"/></Relationships>',
        )
        archive.writestr(
            "word/document.xml",
            '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
            + "<w:p><w:r><w:t>Backups restore nightly.</w:t></w:r></w:p>"
            + "<w:p/>" * count
            + "</w:body></w:document>",
        )
    return path


def test_a_docx_of_more_elements_than_its_limit_allows_is_refused_before_python_docx_reads_it(tmp_path: Path) -> None:
    """A 147 KB .docx of 100 MB of empty paragraphs took 2.3 GB as python-docx's tree: elements are counted first,
    streaming, one per 16 bytes of the limit."""
    import pytest

    from rag_service.errors import DocumentReadError

    path = _empty_paragraphs(tmp_path / "empty.docx", 100_000)
    with pytest.raises(DocumentReadError) as refused:
        load_document(path, max_bytes=MB)
    assert str(refused.value) == (
        f"{path} holds over 62,500 XML elements, one per 16 bytes of the limit of 1,000,000 (RAG_MAX_FILE_BYTES); "
        "set it higher to index it"
    )
    assert load_document(path, max_bytes=2 * MB).text == "Backups restore nightly."


def test_a_non_breaking_hyphen_is_kept(tmp_path: Path) -> None:
    """Word's Ctrl+Shift+- (``w:noBreakHyphen``): "555-0199" was stored as "5550199"."""
    run = '<w:r><w:t>Call 555</w:t><w:noBreakHyphen/><w:t xml:space="preserve">0199 about the e</w:t>' + (
        "<w:noBreakHyphen/><w:t>mail outage.</w:t></w:r>"
    )
    path = make_docx_xml(tmp_path / "phone.docx", [f"<w:p>{run}</w:p>"])
    assert _text(path) == "Call 555-0199 about the e-mail outage."
