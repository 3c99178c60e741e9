"""A file its reader or chunker cannot take is one clear line about that file, never a traceback: a PDF
filter pypdf lacks, a Word part packed with an unknown zip method, JSON nested past the limit, a reader's
unforeseen error. And the JSON loader and chunker agree: blank is empty, NaN is a value."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import pytest

from rag_service.errors import ChunkingError, DocumentReadError
from rag_service.ingest import loaders
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.jsonchunk import MAX_JSON_DEPTH
from rag_service.ingest.loaders import load_document
from tests.documents import make_docx

MB = 1_000_000


def filtered_pdf(path: Path, filter_name: bytes) -> Path:
    """A one-page PDF whose content stream claims the filter ``filter_name`` (as make_badpdf.py of audit 47)."""
    stream = b"BT /F1 12 Tf 72 700 Td (Hello odd filter) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter %s >>\nstream\n%s\nendstream" % (len(stream), filter_name, stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(out)
    return path


def docx_with_zip_method(path: Path, method: int) -> Path:
    """A Word file whose ``word/document.xml`` says it is packed with zip compression ``method`` (9: Deflate64)."""
    make_docx(path, [("h1", "Field guide"), ("p", "Herons nest in March.")])
    source = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_STORED) as target:
        for item in source.infolist():
            target.writestr(item.filename, source.read(item.filename))
    data = bytearray(packed.getvalue())
    name = b"word/document.xml"
    for signature, method_at, name_at in ((b"PK\x03\x04", 8, 30), (b"PK\x01\x02", 10, 46)):
        local = data.find(signature)
        while local >= 0 and data[local + name_at : local + name_at + len(name)] != name:
            local = data.find(signature, local + 1)
        data[local + method_at : local + method_at + 2] = struct.pack("<H", method)
    path.write_bytes(bytes(data))
    return path


def test_a_pdf_filter_pypdf_lacks_is_the_files_one_line(tmp_path: Path) -> None:
    path = filtered_pdf(tmp_path / "badfilter.pdf", b"/FooDecode")
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=MB)
    assert str(info.value) == f"{path} is not a readable PDF (Unsupported filter /FooDecode); re-save or re-export it"


def test_a_word_part_packed_with_an_unknown_zip_method_is_the_files_one_line(tmp_path: Path) -> None:
    path = docx_with_zip_method(tmp_path / "packed.docx", 9)
    with pytest.raises(DocumentReadError, match=r"packed\.docx is not a readable Word document \(packed with a zip "):
        load_document(path, max_bytes=MB)


def test_an_error_no_reader_foresaw_fails_the_file_with_its_type(tmp_path: Path, monkeypatch) -> None:
    def broken(path: Path, text: str) -> str:
        raise TypeError("'NoneType' object is not subscriptable")

    monkeypatch.setattr(loaders, "read_notebook", broken)
    path = tmp_path / "nb.ipynb"
    path.write_text("{}")
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=MB)
    message = str(info.value)
    assert message.startswith(f"{path} could not be read (TypeError: 'NoneType' object is not subscriptable)")
    assert "\n" not in message and "report" in message


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 700, 1200])
def test_json_past_the_depth_limit_says_so_in_loader_and_chunker(tmp_path: Path, depth: int) -> None:
    text = "[" * depth + '"x"' + "]" * depth
    path = tmp_path / "deep.json"
    path.write_text(text)
    where = f"JSON nested more than {MAX_JSON_DEPTH} levels deep (line 1 column {MAX_JSON_DEPTH + 1})"
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=MB)
    assert str(info.value) == f"{path} is {where}; flatten it"
    with pytest.raises(ChunkingError) as chunking:
        make_chunker("json").split(text)
    assert str(chunking.value) == f"{where}; flatten it or use another strategy"


def test_json_at_the_depth_limit_is_read_and_chunked(tmp_path: Path) -> None:
    text = "[" * MAX_JSON_DEPTH + '"x"' + "]" * MAX_JSON_DEPTH
    path = tmp_path / "deep.json"
    path.write_text(text)
    assert load_document(path, max_bytes=MB).text == text
    chunks = make_chunker("json", chunk_size=8).split(text).chunks
    (chunk,) = chunks  # the innermost arrays that fit, at their path
    assert chunk.content.strip("[]") == '"x"' and text[chunk.start_char : chunk.end_char] == chunk.content
    assert chunk.headers["h1"] == "$" + "[0]" * (MAX_JSON_DEPTH - chunk.content.count("["))


def test_brackets_inside_json_strings_are_no_nesting(tmp_path: Path) -> None:
    path = tmp_path / "brackets.json"
    path.write_text('{"a": "' + "[" * 600 + '\\"{"}')
    assert load_document(path, max_bytes=MB).text.startswith('{"a"')


@pytest.mark.parametrize(("name", "text"), [("empty.json", ""), ("blank.json", " \n\t\n"), ("blank.jsonl", "\n\n")])
def test_a_blank_json_file_is_an_empty_document(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    doc = load_document(path, max_bytes=MB)
    assert doc.text == text
    assert make_chunker("json").split(doc.text).chunks == []


def test_json_nan_and_infinity_pass_loader_and_chunker_alike(tmp_path: Path) -> None:
    text = '{"metric": NaN, "high": Infinity, "low": -Infinity, "ok": 1}'
    path = tmp_path / "metrics.json"
    path.write_text(text)
    assert load_document(path, max_bytes=MB).text == text
    chunks = make_chunker("json", chunk_size=12).split(text).chunks
    assert [(c.headers["h1"], c.content) for c in chunks] == [
        ("$.metric", "NaN"),
        ("$.high", "Infinity"),
        ("$.low", "-Infinity"),
        ("$.ok", "1"),
    ]
