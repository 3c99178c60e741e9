"""Loading every supported format into stored text: PDF pages, Word headings, notebooks, JSON, code, LaTeX, HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service import list_strategies, recommend_strategy
from rag_service.errors import DocumentReadError
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.filetypes import CODE_SUFFIXES, SUPPORTED_SUFFIXES
from rag_service.ingest.formats.pdftext import PAGE_BREAK, page_span, with_pages
from rag_service.ingest.loaders import discover, load_document
from tests.documents import make_docx, make_notebook, make_pdf, make_structured_pdf
from tests.unit.test_chunker_properties import assert_chunks_valid

MB = 1_000_000
REQUIRED_CODE = [".py", ".js", ".ts", ".tsx", ".go", ".java", ".rs", ".c", ".h", ".cpp", ".cs", ".rb", ".php", ".kt"]
REQUIRED_CODE += [".swift", ".scala", ".sql", ".sh"]


def test_every_required_suffix_is_supported() -> None:
    assert set(REQUIRED_CODE) <= set(CODE_SUFFIXES)
    assert {".json", ".jsonl", ".yaml", ".yml", ".tex", ".pdf", ".docx", ".pptx", ".ipynb"} <= set(SUPPORTED_SUFFIXES)
    assert {".md", ".markdown", ".mdx", ".txt", ".text", ".rst", ".adoc", ".html", ".htm"} <= set(SUPPORTED_SUFFIXES)


@pytest.mark.parametrize(
    ("value", "strategy"),
    [
        ("src/app.py", "code"),
        (Path("web/App.tsx"), "code"),
        (".go", "code"),
        ("db/schema.sql", "code"),
        ("data.json", "json"),
        ("events.jsonl", "json"),
        ("paper.tex", "latex"),
        ("docs/install.rst", "rst"),
        ("text/x-rst", "rst"),
        ("guide.adoc", "asciidoc"),
        ("text/asciidoc", "asciidoc"),
        ("book/ch01.asc", "asciidoc"),  # PGP armour too: the loader leaves a key out
        ("page.HTML", "html"),
        ("README.md", "markdown"),
        ("spec.docx", "markdown"),
        ("deck.pptx", "markdown"),
        ("analysis.ipynb", "markdown"),
        ("manual.pdf", "markdown"),
        ("config.yaml", "config"),
        ("application/yaml", "config"),
        ("notes.txt", "recursive"),
        ("text/markdown", "markdown"),
        ("text/html; charset=utf-8", "html"),
        ("application/json", "json"),
        ("text/x-python", "code"),
        ("application/pdf", "markdown"),
        ("text/plain", "recursive"),
    ],
)
def test_recommend_strategy(value: str | Path, strategy: str) -> None:
    assert recommend_strategy(value) == strategy
    assert strategy in list_strategies()


def test_list_strategies_has_all_fourteen_and_auto() -> None:
    names = list_strategies()
    assert names[-1] == "auto" and len(names) == 15 and len(set(names)) == 15


def test_pdf_pages_are_separated_and_numbered(tmp_path: Path) -> None:
    pages = ["Backups run nightly.", "Restores take an hour.", "Contacts."]
    path = make_pdf(tmp_path / "manual.pdf", pages, title="Ops")
    doc = load_document(path, max_bytes=MB)
    assert doc.title == "Ops"
    assert doc.text.count(PAGE_BREAK) == 2
    assert doc.text.split(PAGE_BREAK) == ["Backups run nightly.", "Restores take an hour.", "Contacts."]
    restores = doc.text.index("Restores")
    assert page_span(doc.text, restores, restores + 8) == (2, 2)
    assert page_span(doc.text, 0, len(doc.text)) == (1, 3)
    chunks = make_chunker("recursive", chunk_size=30, chunk_overlap=0, min_chunk_chars=0).split(doc.text).chunks
    paged = with_pages(doc.text, chunks)
    assert_chunks_valid(doc.text, type(make_chunker("recursive").split(""))(paged, {}))
    assert [(c.metadata["page_start"], c.metadata["page_end"]) for c in paged] == [(1, 1), (2, 2), (3, 3)]


def test_pdf_without_text_layer_is_one_clear_line(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "scan.pdf", ["ignored"], scanned=True)
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=MB)
    assert str(info.value) == (
        f"{path}: no text layer (a scanned PDF?); run OCR on it first (e.g. ocrmypdf in.pdf out.pdf) "
        "and index the result"
    )


def test_encrypted_pdf_is_one_clear_line(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "locked.pdf", ["secret plans"], password="hunter2")
    with pytest.raises(DocumentReadError, match=r"locked\.pdf is an encrypted PDF; decrypt it first") as info:
        load_document(path, max_bytes=MB)
    assert "\n" not in str(info.value)


def test_broken_pdf_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 50)
    with pytest.raises(DocumentReadError, match=r"broken\.pdf is not a readable PDF \(") as info:
        load_document(path, max_bytes=MB)
    assert "\n" not in str(info.value) and "Error" not in str(info.value), "no exception class names"
    assert str(info.value).endswith("); re-save or re-export it")


def test_docx_headings_become_the_header_path(tmp_path: Path) -> None:
    path = make_docx(
        tmp_path / "spec.docx",
        [
            ("h1", "Deployment Guide"),
            ("p", "This guide explains how the service is deployed to production servers."),
            ("h2", "Rollback"),
            ("p", "To roll back, redeploy the previous release tag and run the migrations down."),
            ("table", "step,owner;deploy,ops"),
        ],
    )
    doc = load_document(path, max_bytes=MB)
    assert doc.title == "Deployment Guide"
    assert doc.text.startswith("# Deployment Guide\n\nThis guide")
    assert "## Rollback" in doc.text and "step | owner\ndeploy | ops" in doc.text
    chunked = make_chunker(recommend_strategy(path), chunk_size=200).split(doc.text)
    assert_chunks_valid(doc.text, chunked)
    rollback = next(c for c in chunked.chunks if "roll back" in c.content)
    assert rollback.header_path == "Deployment Guide > Rollback"


def test_docx_body_text_that_looks_like_a_header_is_not_one(tmp_path: Path) -> None:
    path = make_docx(
        tmp_path / "cages.docx",
        [
            ("p", "# of ferrets per cage: three at most, two when they are young."),
            ("h1", "Cages"),
            ("p", "## sizes are in centimetres throughout this chapter of the guide."),
            ("table", "# ,count;ferrets,3"),
        ],
    )
    doc = load_document(path, max_bytes=MB)
    assert doc.title == "Cages"  # not the body paragraph starting with "# "
    assert doc.text.startswith("\\# of ferrets per cage") and "\n\\## sizes are" in doc.text
    assert "\\# | count\nferrets | 3" in doc.text
    chunked = make_chunker("markdown", chunk_size=80, chunk_overlap=0, min_chunk_chars=0).split(doc.text)
    assert_chunks_valid(doc.text, chunked)
    assert {c.header_path for c in chunked.chunks} == {"", "Cages"}


def test_corrupt_docx_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.docx"
    path.write_bytes(b"PK\x03\x04" + b"not really a zip" * 20)
    with pytest.raises(DocumentReadError) as info:
        load_document(path, max_bytes=MB)
    assert str(info.value) == (
        f"{path} is not a readable Word document (not a zip archive, as a .docx is); re-save it as .docx"
    )


def test_notebook_cells_are_markdown_and_fenced_code(tmp_path: Path) -> None:
    path = make_notebook(
        tmp_path / "analysis.ipynb",
        [("markdown", "# Churn analysis\n\nWe load the data."), ("code", "import pandas as pd\ndf = pd.read_csv('x')")],
    )
    doc = load_document(path, max_bytes=MB)
    assert doc.title == "Churn analysis"
    code = "```python\nimport pandas as pd\ndf = pd.read_csv('x')\n```"
    assert doc.text == "# Churn analysis\n\nWe load the data.\n\n" + code
    assert "OUTPUT-NOT-INDEXED" not in doc.text


def test_not_a_notebook_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "x.ipynb"
    path.write_text('{"cells": 3}')
    with pytest.raises(DocumentReadError, match=r"has no 'cells' list"):
        load_document(path, max_bytes=MB)


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("bad.json", '{"a": 1,\n "b": [1, 2,, 3]}', "line 2 column"),
        ("bad.jsonl", '{"a": 1}\n{"b": 2}\n{"c": oops}\n', "line 3 column 7"),
    ],
)
def test_malformed_json_names_the_line(tmp_path: Path, name: str, content: str, where: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DocumentReadError, match=rf"{name} is not valid JSON \({where}.*; fix the syntax$"):
        load_document(path, max_bytes=MB)


def test_json_and_yaml_and_code_keep_their_text(tmp_path: Path) -> None:
    for name, content in [
        ("data.json", '{"name": "rag", "tags": ["a", "b"]}\n'),
        ("events.jsonl", '{"id": 1}\n\n{"id": 2}\n'),
        ("config.yml", "server:\n  port: 8080\n"),
        ("main.go", "package main\n\nfunc main() {}\n"),
        ("run.sh", "#!/bin/sh\necho hi\n"),
    ]:
        path = tmp_path / name
        path.write_text(content)
        doc = load_document(path, max_bytes=MB)
        assert (doc.text, doc.title) == (content, path.stem)


def test_minified_code_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bundle.min.js"
    path.write_text("var a=1;" * 5000)
    with pytest.raises(DocumentReadError, match=r"line of 40,000 characters \(line 1\): minified") as info:
        load_document(path, max_bytes=MB)
    assert "\n" not in str(info.value)


def test_latex_title(tmp_path: Path) -> None:
    path = tmp_path / "paper.tex"
    path.write_text("\\documentclass{article}\n\\title{On   Chunking}\n\\begin{document}\nHello.\n\\end{document}\n")
    assert load_document(path, max_bytes=MB).title == "On Chunking"


def test_latex_title_skips_comments_and_reads_nested_braces(tmp_path: Path) -> None:
    path = tmp_path / "paper.tex"
    path.write_text(
        "% \\title{Old Draft}\n\\documentclass{article}\n"
        "\\title{A Study of \\emph{Zebra} Migration\\thanks{Funded by X.} 50\\% \\\\ "
        "in \\textbf{\\textit{Kenya}}} % v2\n"
        "\\begin{document}\nHello.\n\\end{document}\n"
    )
    assert load_document(path, max_bytes=MB).title == "A Study of Zebra Migration 50% in Kenya"


def test_latex_header_paths_are_plain_words() -> None:
    text = (
        "\\section{Methods \\label{sec:methods}}\nWe fitted a random walk model to the data.\n"
        "\\subsection{Data \\textit{cleaning}~and \\texttt{NaN}s}\nOutliers beyond three sigma were removed.\n"
    )
    chunks = make_chunker("latex", chunk_size=200, chunk_overlap=0, min_chunk_chars=0).split(text).chunks
    assert [c.header_path for c in chunks] == ["Methods", "Methods > Data cleaning and NaNs"]


def test_html_headings_become_header_lines(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><body><h1>Manual</h1><p>Intro paragraph about the manual and its purpose.</p>"
        "<h3>Install <b>now</b></h3><p>Install with pip and check the version afterwards.</p>"
        "<script>var h = '<h2>not</h2>';</script></body></html>"
    )
    doc = load_document(path, max_bytes=MB)
    assert doc.title == "Manual"
    assert doc.text == (
        "# Manual\n\nIntro paragraph about the manual and its purpose.\n\n"
        "### Install now\n\nInstall with pip and check the version afterwards."
    )
    chunks = make_chunker("html", chunk_size=200).split(doc.text).chunks
    assert [c.header_path for c in chunks] == ["Manual", "Manual > Install now"]
    assert chunks[1].headers == {"h1": "Manual", "h3": "Install now"}


def test_discovery_finds_the_new_types_and_skips_others(tmp_path: Path) -> None:
    for name in ["a.py", "b.pdf", "c.docx", "d.ipynb", "e.tex", "f.jsonl", "g.yaml", "h.exe", "i.png"]:
        (tmp_path / name).write_bytes(b"x")
    found = discover([tmp_path])
    files, skipped = found.files, found.skipped
    assert [p.name for p in files] == ["a.py", "b.pdf", "c.docx", "d.ipynb", "e.tex", "f.jsonl", "g.yaml"]
    assert sorted(p.name for p, _ in skipped) == ["h.exe", "i.png"]
    assert all(".ipynb" in reason and ".py" in reason for _, reason in skipped)


def test_pdf_running_header_and_footer_are_left_out(tmp_path: Path) -> None:
    pages = ["1. Revenue\nRevenue reached 4.7 million euros.", "2. Staffing\nWe hired 23 engineers.", "3. Outlook"]
    path = make_pdf(
        tmp_path / "report.pdf", pages, header="ACME Confidential", footer="Page {page} of 3 - ACME Quarterly"
    )
    doc = load_document(path, max_bytes=MB)
    assert doc.text.split(PAGE_BREAK) == [
        "1. Revenue\nRevenue reached 4.7 million euros.",
        "2. Staffing\nWe hired 23 engineers.",
        "3. Outlook",
    ]


def test_pdf_edge_lines_numbered_unlike_pages_or_set_as_headings_are_kept(tmp_path: Path) -> None:
    """Digits aside, "Total sightings: 3 / 6 / 9" and a large "Chapter 1" ... "Chapter 3" atop each page read as
    running lines and were dropped, and the chapters' loss took the document's font headings with them."""
    tallies = [
        f"Entry {n}: we watched {bird}.\nTotal sightings: {3 * n}"
        for n, bird in enumerate(["owls", "kites", "terns"], 1)
    ]
    doc = load_document(make_pdf(tmp_path / "diary.pdf", tallies, footer="Page {page}"), max_bytes=MB)
    assert doc.text.split(PAGE_BREAK) == tallies  # the page numbers alone left out
    chapters = [
        [
            ("h1", f"Chapter {n}"),
            ("h2", f"Section {n}.1 on {topic}"),
            *[("p", f"How {topic} work, step {step} of three, in detail.") for step in (1, 2, 3)],
        ]
        for n, topic in enumerate(["installs", "upgrades", "backups"], 1)
    ]
    doc = load_document(make_structured_pdf(tmp_path / "book.pdf", chapters), max_bytes=MB)
    page = doc.text.split(PAGE_BREAK)[1]
    assert page.startswith("# Chapter 2\n## Section 2.1 on upgrades\nHow upgrades work, step 1 of three"), page


def test_pdf_a_date_that_changes_a_day_a_page_is_kept_and_one_repeated_on_every_page_is_not(tmp_path: Path) -> None:
    """A diary's date heads each page, a day on: its numbers grow no faster than the pages, like a page number's,
    and the dates were dropped as a running header (the only place each day was named)."""
    entries = [f"We counted {bird} at the pond." for bird in ["owls", "kites", "terns", "geese"]]
    for header in ("Field log 2024-03-{page:02d}", "Field log March {page}, 2024", "Field log {page}.03.2024"):
        doc = load_document(make_pdf(tmp_path / "diary.pdf", entries, header=header), max_bytes=MB)
        days = [header.format(page=n) + "\n" + entry for n, entry in enumerate(entries, 1)]
        assert doc.text.split(PAGE_BREAK) == days, header
    doc = load_document(make_pdf(tmp_path / "issued.pdf", entries, header="Issued 2024-03-01"), max_bytes=MB)
    assert doc.text.split(PAGE_BREAK) == entries  # one date on every page: a running header


def test_pdf_lines_repeated_on_two_pages_only_are_kept(tmp_path: Path) -> None:
    pages = ["Summary\nFirst page.", "Summary\nSecond page.", "Details\nThird page."]
    doc = load_document(make_pdf(tmp_path / "two.pdf", pages[:2], header="Draft"), max_bytes=MB)
    assert doc.text.split(PAGE_BREAK) == ["Draft\nSummary\nFirst page.", "Draft\nSummary\nSecond page."]
    doc = load_document(make_pdf(tmp_path / "three.pdf", pages), max_bytes=MB)
    assert doc.text.split(PAGE_BREAK) == pages  # "Summary" tops two pages of three: not a running header


def test_pdf_pages_of_repeated_text_keep_it(tmp_path: Path) -> None:
    long_lines = [f"Page {n} is about topic number {n}. " * 12 for n in range(1, 5)]  # long repeated lines
    doc = load_document(make_pdf(tmp_path / "long.pdf", long_lines), max_bytes=MB)
    pages = [" ".join(page.split()) for page in doc.text.split(PAGE_BREAK)]
    assert [page.count(f"Page {n} is about topic number {n}.") for n, page in enumerate(pages, 1)] == [12] * 4
    totals = [f"Total: {n}" for n in range(1, 5)]  # a page that would lose every line is no furniture
    doc = load_document(make_pdf(tmp_path / "totals.pdf", totals), max_bytes=MB)
    assert doc.text.split(PAGE_BREAK) == totals
