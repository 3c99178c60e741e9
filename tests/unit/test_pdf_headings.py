"""PDF headings as header paths: from the outline where there is one, else from clearly larger fonts, else none;
chunks stay exact slices of the stored text."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service import recommend_strategy
from rag_service.ingest.chunk import ChunkedDocument
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.formats.pdfheadings import Heading
from rag_service.ingest.formats.pdfoutline import OutlineEntry, outline_headings
from rag_service.ingest.formats.pdftext import PAGE_BREAK, with_pages
from rag_service.ingest.loaders import load_document
from tests.documents import make_structured_pdf
from tests.unit.test_chunker_properties import assert_chunks_valid

MB = 1_000_000
INSTALL = (
    "Install the service with pip install rag-service on a machine with Python 3.11 and two cores at least. "
    "The wheel brings its own model files, so nothing else is downloaded at the first start."
)
CONFIGURE = (
    "Point RAG_DATABASE_URL at the server, or leave it unset and an embedded PostgreSQL starts by itself. "
    "The embedded server keeps its files under the data directory and is migrated when it starts."
)
BACKUPS = (
    "Backups run every night at two; each keeps the write-ahead log of the day so a restore can replay it. "
    "A backup that fails pages the operator on duty and is retried an hour later."
)
RESTORES = (
    "Restores are tested monthly on a spare host, and the time each took is written to the operations log. "
    "A restore slower than the last one by a quarter is looked into before the next test."
)
MANUAL = [
    [("h1", "Getting Started"), ("p", INSTALL), ("h2", "Configuration"), ("p", CONFIGURE)],
    [("h1", "Operations"), ("p", BACKUPS), ("h2", "Restores"), ("p", RESTORES)],
]
HEADINGS = ["# Getting Started", "## Configuration", "# Operations", "## Restores"]
PATHS = {
    "pip install": {"h1": "Getting Started"},
    "RAG_DATABASE_URL": {"h1": "Getting Started", "h2": "Configuration"},
    "Backups run": {"h1": "Operations"},
    "Restores are tested": {"h1": "Operations", "h2": "Restores"},
}
UNIFORM = {"h1": 11, "h2": 11, "p": 11}


def _chunked(path: Path) -> tuple[str, ChunkedDocument]:
    """The stored text of the PDF at ``path`` and its chunks as ``auto`` makes them, offsets checked."""
    text = load_document(path, max_bytes=MB).text
    chunked = make_chunker(recommend_strategy(path), chunk_size=200, chunk_overlap=0).split(text)
    assert_chunks_valid(text, chunked)
    return text, chunked


def _headings(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("#")]


def _headers_of(chunked: ChunkedDocument, phrase: str) -> dict[str, str]:
    (headers,) = {tuple(c.headers.items()) for c in chunked.chunks if phrase in c.content}
    return dict(headers)


def test_pdf_outline_of_two_levels_gives_header_paths(tmp_path: Path) -> None:
    # one font size throughout: the headings can only come from the outline (bookmarks)
    path = make_structured_pdf(tmp_path / "manual.pdf", MANUAL, outline=True, sizes=UNIFORM)
    text, chunked = _chunked(path)
    assert _headings(text) == HEADINGS
    assert {phrase: _headers_of(chunked, phrase) for phrase in PATHS} == PATHS
    restores = [c for c in with_pages(text, chunked.chunks) if "Restores are" in c.content]
    assert {(c.metadata["page_start"], c.metadata["page_end"]) for c in restores} == {(2, 2)}


def test_pdf_outline_title_not_on_its_page_is_skipped(tmp_path: Path) -> None:
    pages = [
        # "Operations" points here but stands on the next page; "Ghost chapter" stands nowhere
        [("h1", "Getting Started"), ("b1", "Operations"), ("b2", "Ghost chapter"), ("p", INSTALL)],
        [("p", "Operations"), ("p", BACKUPS), ("h2", "Restores"), ("p", RESTORES)],
    ]
    path = make_structured_pdf(tmp_path / "manual.pdf", pages, outline=True, sizes=UNIFORM)
    text, chunked = _chunked(path)
    assert _headings(text) == ["# Getting Started", "## Restores"]
    assert "\nOperations\n" in text and "Ghost" not in text
    assert _headers_of(chunked, "Backups run") == {"h1": "Getting Started"}
    assert _headers_of(chunked, "Restores are tested") == {"h1": "Getting Started", "h2": "Restores"}


def test_pdf_without_outline_gets_headings_from_larger_fonts(tmp_path: Path) -> None:
    path = make_structured_pdf(tmp_path / "manual.pdf", MANUAL)  # h1 20 pt, h2 15 pt, text 11 pt; no outline
    text, chunked = _chunked(path)
    assert _headings(text) == HEADINGS
    assert {phrase: _headers_of(chunked, phrase) for phrase in PATHS} == PATHS


@pytest.mark.parametrize(
    "sizes",
    [UNIFORM, {"h1": 20, "h2": 11, "p": 11}],  # one size; one size larger alone is no clear signal either
    ids=["one size", "one heading size"],
)
def test_pdf_without_a_clear_font_signal_gets_no_headings(tmp_path: Path, sizes: dict[str, int]) -> None:
    pages = [[*MANUAL[0], ("p", "# of ferrets per cage: two, as the lease says.")], MANUAL[1]]
    path = make_structured_pdf(tmp_path / "manual.pdf", pages, sizes=sizes)
    text, chunked = _chunked(path)
    assert _headings(text) == []
    assert "\n\\# of ferrets per cage" in text  # a line that would read as a header is escaped
    assert chunked.chunks and all(c.headers == {} for c in chunked.chunks)
    assert [page.split("\n")[0] for page in text.split(PAGE_BREAK)] == ["Getting Started", "Operations"]


def test_outline_titles_are_found_as_whole_lines_a_section_number_aside() -> None:
    lines = ["1", "1 Introduction", "Read the Overview first.", "Appendix A Copying", "A.1 Free Documentation", "x"]
    entries = [
        OutlineEntry("Introduction", 1, 0),  # "1" above it is a page number, not part of it
        OutlineEntry("Overview", 1, 0),  # only inside a sentence: skipped
        OutlineEntry("A Copying", 1, 0),
        OutlineEntry("Free  documentation", 2, 0),  # whitespace and case aside
    ]
    assert outline_headings(entries, [lines]) == [[Heading(1, 1, 1), Heading(3, 3, 1), Heading(4, 4, 2)]]
