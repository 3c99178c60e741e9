"""A PDF's reading is bounded by the file limit: content streams drawn on by many pages, forms shown many times."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from rag_service.errors import DocumentReadError
from rag_service.ingest.loaders import load_document

LIMIT = 100_000
_TEXT = b"BT /F1 12 Tf 72 712 Td (backups restore nightly) Tj ET\n"


def _pdf(path: Path, content: bytes, *, pages: int, form: bytes | None = None) -> Path:
    """``pages`` pages all drawing on one Flate ``content`` stream, with ``form`` as the form XObject ``/Fm``."""
    stream = zlib.compress(content, 9)
    fonts = b"/Font << /F1 3 0 R >>"
    resources = b"<< " + fonts + b" /XObject << /Fm 5 0 R >> >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (6 + i) for i in range(pages)) + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << "
        + fonts
        + b" >> /Length %d >>\nstream\n" % len(form or b"")
        + (form or b"")
        + b"\nendstream",
    ]
    objects += [
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources " + resources + b" /Contents 4 0 R >>"
    ]
    objects += objects[-1:] * (pages - 1)
    body, offsets = b"%PDF-1.4\n", []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(
        b"%010d 00000 n \n" % o for o in offsets
    )
    body += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(body)
    return path


def test_a_stream_shared_by_many_pages_counts_on_each(tmp_path: Path) -> None:
    """20 pages drawing on one stream of no-ops that unpacks to a tenth of the limit: parsed 20 times, refused."""
    content = _TEXT + b"q Q\n" * (LIMIT // 40)
    assert "backups" in load_document(_pdf(tmp_path / "one.pdf", content, pages=1), max_bytes=LIMIT).text
    path = _pdf(tmp_path / "bomb.pdf", content, pages=20)
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=LIMIT)
    assert str(info.value) == (
        f"{path}: its pages draw on over 100,550 bytes of unpacked content streams (one shared by pages counts on "
        "each), over the limit of 100,000 bytes (RAG_MAX_FILE_BYTES); set it higher to index it"
    )


def test_a_form_shown_many_times_runs_out_of_operators(tmp_path: Path) -> None:
    """One page showing a form of 200 no-ops 1,000 times: 200,000 operators from 8 KB of content."""
    path = _pdf(tmp_path / "forms.pdf", _TEXT + b"/Fm Do\n" * 1_000, pages=1, form=b"q Q\n" * 100)
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=LIMIT)
    assert str(info.value) == (
        f"{path}: showing its text runs over 50,000 drawing operators, one per 2 bytes of the limit of 100,000 "
        "(RAG_MAX_FILE_BYTES); set it higher to index it"
    )
