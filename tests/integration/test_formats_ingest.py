"""Indexing every format into a real PostgreSQL: bad files fail alone with one-line reasons (minified code is
skipped), PDF chunks know their pages, PDF and Word headings and code definitions become header paths, ``auto``
picks per file, ``reindex --all`` keeps each document's strategy, and PRD §8's queries find code and schema first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from rag_service.service import UniversalRAGService
from tests.documents import make_docx, make_notebook, make_pdf, make_pptx, make_structured_pdf

PROJECT = Path(__file__).resolve().parents[1] / "data" / "prd_project"


@pytest.fixture
def mixed(tmp_path, monkeypatch) -> Path:
    """Good files of every family, and one of each kind of bad file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    d = tmp_path / "in"
    d.mkdir()
    (d / "guide.md").write_text("# Guide\n\nHow to install the service and run it in production.\n")
    (d / "app.py").write_text("def main():\n    '''Start the app.'''\n    return 0\n")
    (d / "data.json").write_text('{"servers": [{"host": "db.internal", "port": 5432}]}')
    (d / "conf.yaml").write_text("server:\n  host: db.internal\n  port: 5432\n")
    (d / "paper.tex").write_text("\\section{Intro}\nText.\n\\begin{equation}\nE = mc^2\n\\end{equation}\n")
    backups, restores = "Backups run every night at two and are kept for thirty days.", "Restores are tested monthly."
    (d / "ops.rst").write_text(f"Ops\n===\n\n.. _backups:\n\nBackups\n-------\n\n{backups}\n")
    (d / "ops.adoc").write_text(f"= Ops\n\n[[restores]]\n== Restores\n\n{restores} A restore takes an hour or less.\n")
    make_pdf(d / "manual.pdf", ["Backups run every night at two.", "Restores are tested monthly."], title="Ops manual")
    make_docx(
        d / "spec.docx",
        [
            ("h1", "Spec"),
            ("p", "Overview of the system: what it stores, who reads it and how it is deployed."),
            ("h2", "Limits"),
            ("p", "At most five thousand requests per minute per key; larger bursts are rejected."),
        ],
    )
    make_notebook(d / "nb.ipynb", [("markdown", "# Notebook\n\nSome analysis."), ("code", "print(1)")])
    make_pptx(
        d / "deck.pptx",
        [
            {"title": "Roadmap", "bullets": [(0, "The search page ships in the third quarter, with filters.")]},
            {"title": "Old pricing", "bullets": [(0, "Superseded: 30 dollars per seat")], "hidden": True},
            {"title": "Pricing", "table": [["Plan", "Price per seat and month"], ["Team", "20 dollars, paid yearly"]]},
        ],
    )
    # the bad ones
    (d / "broken.json").write_text('{"a": [1, 2,, 3]}')
    make_pdf(d / "scan.pdf", ["x"], scanned=True)
    make_pdf(d / "locked.pdf", ["secret"], password="pw")
    (d / "corrupt.docx").write_bytes(b"PK\x03\x04" + b"\x00not a zip" * 30)
    (d / "bundle.js").write_text("var a=1;" * (10 * 1024 * 1024 // 8))  # one 10 MB line
    return d


def test_bad_files_fail_alone_with_one_line_reasons(indexer, mixed, db):
    report = indexer.index_paths([mixed], collection="mixed", progress=False)
    failed = {p.source: p.reason for p in report.failed}
    assert set(failed) == {"in/broken.json", "in/scan.pdf", "in/locked.pdf", "in/corrupt.docx"}
    assert all("\n" not in reason for reason in failed.values())
    assert failed["in/scan.pdf"].endswith("run OCR on it first (e.g. ocrmypdf in.pdf out.pdf) and index the result")
    assert "encrypted PDF" in failed["in/locked.pdf"]
    assert "not valid JSON (line 1 column 13" in failed["in/broken.json"]
    assert "not a readable Word document" in failed["in/corrupt.docx"]
    # minified code is left out on purpose: skipped with its reason, nothing failed about it
    assert [(p.source, p.reason) for p in report.skipped] == [
        ("in/bundle.js", "has a line of 10,485,760 characters (line 1): minified or generated code is not indexed; "
         "index its source instead")
    ]  # fmt: skip
    assert report.added == 11
    with db.transaction() as session:
        chunkers = dict(session.execute(text("SELECT source, split_part(chunker, ':', 1) FROM documents")).all())
    assert chunkers == {
        "in/guide.md": "markdown",
        "in/app.py": "code",
        "in/data.json": "json",
        "in/conf.yaml": "config",
        "in/paper.tex": "latex",
        "in/ops.rst": "rst",
        "in/ops.adoc": "asciidoc",
        "in/manual.pdf": "markdown",
        "in/spec.docx": "markdown",
        "in/nb.ipynb": "markdown",
        "in/deck.pptx": "markdown",
    }


def _chunks(db, source: str) -> list[tuple[str, str, dict, int, int, str]]:
    with db.transaction() as session:
        return [
            tuple(row)
            for row in session.execute(
                text(
                    "SELECT c.content, c.header_path, c.metadata, c.start_char, c.end_char, d.content "
                    "FROM document_chunks c JOIN documents d ON d.id = c.document_id "
                    "WHERE d.source = :source ORDER BY c.chunk_index"
                ),
                {"source": source},
            ).all()
        ]


def test_stored_offsets_pages_and_header_paths(indexer, mixed, db):
    indexer.index_paths([mixed], collection="mixed")
    for source in ["manual.pdf", "spec.docx", "deck.pptx", "app.py", "data.json", "paper.tex", "nb.ipynb"]:
        source = f"in/{source}"
        rows = _chunks(db, source)
        assert rows, source
        for content, _, _, start, end, stored in rows:
            assert stored[start:end] == content  # offsets refer to the stored (extracted) text
    pdf = _chunks(db, "in/manual.pdf")
    assert [(r[2]["page_start"], r[2]["page_end"]) for r in pdf] == [(1, 2)]  # one short chunk over both pages
    assert "Restores are tested monthly." in pdf[0][0]
    assert [r[1] for r in _chunks(db, "in/spec.docx")] == ["Spec", "Spec > Limits"]
    deck = _chunks(db, "in/deck.pptx")
    assert [(r[1], r[2]["page_start"], r[2]["page_end"]) for r in deck] == [("Roadmap", 1, 1), ("Pricing", 3, 3)]
    assert [r[1] for r in _chunks(db, "in/app.py")] == ["app > main"]
    assert [(r[0], r[1]) for r in _chunks(db, "in/ops.rst")] == [
        ("Backups\n-------\n\nBackups run every night at two and are kept for thirty days.", "Ops > Backups")
    ]
    assert [(r[0], r[1]) for r in _chunks(db, "in/ops.adoc")] == [
        ("== Restores\n\nRestores are tested monthly. A restore takes an hour or less.", "Ops > Restores")
    ]
    assert [(r[0], r[1]) for r in _chunks(db, "in/data.json")] == [
        ('{"servers": [{"host": "db.internal", "port": 5432}]}', "$")
    ]


def test_pdf_pages_in_metadata_on_a_longer_pdf(indexer, tmp_path, monkeypatch, db):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    pages = [f"Page {n} is about topic number {n}. " * 12 for n in range(1, 5)]
    make_pdf(tmp_path / "long.pdf", pages)
    indexer.index_paths([tmp_path / "long.pdf"], collection="pdf")
    rows = _chunks(db, "long.pdf")
    assert len(rows) >= 4
    for content, _, meta, start, end, stored in rows:
        first, last = meta["page_start"], meta["page_end"]
        assert stored.count("\f", 0, start) + 1 == first and first + stored.count("\f", start, end) == last
        assert f"Page {first} is about" in content or f"topic number {first}." in content


def test_pdf_outline_headings_are_stored_header_paths(indexer, tmp_path, monkeypatch, db):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    install = "Install the service with pip on a machine with Python 3.11; the wheel brings its model files."
    configure = "Point RAG_DATABASE_URL at the server, or leave it unset and an embedded PostgreSQL starts."
    backups = "Backups run every night at two and keep the write-ahead log of the day for a restore to replay."
    pages = [
        [("h1", "Getting Started"), ("p", install), ("h2", "Configuration"), ("p", configure)],
        [("h1", "Operations"), ("p", backups)],
    ]
    make_structured_pdf(tmp_path / "manual.pdf", pages, outline=True, sizes={"h1": 11, "h2": 11, "p": 11})
    indexer.index_paths([tmp_path / "manual.pdf"], collection="pdf")
    rows = _chunks(db, "manual.pdf")
    assert [(r[1], r[2]["page_start"]) for r in rows] == [
        ("Getting Started", 1),
        ("Getting Started > Configuration", 1),
        ("Operations", 2),
    ]
    for content, _, _, start, end, stored in rows:
        assert stored[start:end] == content
    assert [r[0].split("\n")[-1] for r in rows] == [install, configure, backups]


def test_strategy_override_and_reindex_all_keep_each_documents_strategy(indexer, mixed, db):
    indexer.index_paths([mixed / "app.py", mixed / "guide.md"], collection="k", strategy="semantic-markdown")
    indexer.index_paths([mixed / "data.json"], collection="k")  # auto: json
    report = indexer.reindex_all(collection="k")
    assert report.failed == [] and report.updated == 3
    with db.transaction() as session:
        chunkers = dict(session.execute(text("SELECT source, split_part(chunker, ':', 1) FROM documents")).all())
    assert chunkers == {"in/app.py": "semantic-markdown", "in/guide.md": "semantic-markdown", "in/data.json": "json"}


def test_progress_is_shown_for_code_and_pdfs(indexer, mixed, capsys):
    indexer.index_paths([mixed / "app.py", mixed / "manual.pdf"], collection="p", progress=True)
    err = capsys.readouterr().err
    assert "indexing p" in err and "2/2" in err and "chunks" in err


def test_cli_reindex_accepts_every_strategy_name(indexer, mixed):
    from rag_service.cli import build_parser

    parser = build_parser()
    for name in ["character", "semantic-markdown", "code", "json", "latex", "html", "auto"]:
        assert parser.parse_args(["reindex", "x", "--strategy", name]).strategy == name
    report = indexer.index_paths([mixed / "guide.md"], collection="c", strategy="auto")
    assert report.added == 1


# --- PRD 08 §8: the test queries over a project of docs and code ------------------------------------

QUERIES = [
    # (query, expected source, text the first chunk must contain)
    ("How does AgentFactory work?", "src/agents/factory.py", "def create_agent("),
    ("database schema", "db/schema.sql", "CREATE TABLE"),
    ("How do I change the embedding model?", "docs/configuration.md", "EMBEDDING_MODEL"),
    ("What happens when a document is re-indexed?", "docs/ingestion.md", "unchanged hash"),
    ("retry a failing call with exponential backoff", "src/utils/retry.py", "def retry_with_backoff("),
]


@pytest.mark.slow
def test_prd_queries_return_the_expected_item_first(db, settings, default_minilm, monkeypatch):
    monkeypatch.chdir(PROJECT)
    service = UniversalRAGService(settings, database=db, embedder=default_minilm, reranker=None)
    report = service.index_paths(["docs", "src", "db"], collection="prd", root=PROJECT)
    assert report.failed == [] and report.added == 7
    firsts = {}
    for query, source, needle in QUERIES:
        result = service.retrieve(query, context="chatbot", collection="prd", max_chunks=5)
        top = result.chunks[0]
        firsts[query] = (top.source, top.header_path)
        assert top.source == source and needle in top.content, json.dumps(firsts, indent=1)
    assert firsts["How does AgentFactory work?"][1] == "factory > AgentFactory"


def test_html_pre_and_word_hash_paragraphs_are_stored_without_false_sections(indexer, tmp_path, monkeypatch, db):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    (tmp_path / "page.html").write_text(
        "<h1>Wombat</h1><p>How to set it up.</p><pre># install the package\npip install wombat\n# run it\n"
        "def f():\n    return 1</pre><p>The paragraph after the block belongs to Wombat.</p>"
    )
    make_docx(tmp_path / "cages.docx", [("h1", "Cages"), ("p", "# of ferrets per cage: three at most.")])
    indexer.index_paths([tmp_path / "page.html", tmp_path / "cages.docx"], collection="pre")
    html = _chunks(db, "page.html")
    assert {r[1] for r in html} == {"Wombat"}
    assert any("# run it\ndef f():\n    return 1\n```" in r[0] for r in html)  # verbatim, indentation kept
    assert {r[1] for r in _chunks(db, "cages.docx")} == {"Cages"}
    for content, _, _, start, end, stored in html + _chunks(db, "cages.docx"):
        assert stored[start:end] == content


def test_a_utf16_file_with_a_byte_order_mark_is_indexed_as_its_text(indexer, tmp_path, monkeypatch, db):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    text = "Tides at the harbour turn twice a day.\r\nCaf\u00e9 opens at six."
    (tmp_path / "notes.txt").write_bytes(text.encode("utf-16"))
    report = indexer.index_paths([tmp_path / "notes.txt"], collection="wide")
    assert report.failed == [] and report.added == 1
    rows = _chunks(db, "notes.txt")
    assert rows and rows[0][5] == "Tides at the harbour turn twice a day.\nCaf\u00e9 opens at six."
    for content, _, _, start, end, stored in rows:
        assert stored[start:end] == content


def test_a_failure_line_names_the_file_once_and_the_reason_without_library_types(indexer, mixed):
    report = indexer.index_paths([mixed], collection="mixed", progress=False)
    lines = {line.split(": ", 2)[1]: line for line in report.lines() if line.startswith("failed: ")}
    for source in ["in/corrupt.docx", "in/broken.json", "in/scan.pdf"]:
        assert lines[source].count(source.split("/")[1]) == 1, lines[source]
    assert lines["in/corrupt.docx"] == (
        "failed: in/corrupt.docx: not a readable Word document (not a zip archive, as a .docx is); re-save it as .docx"
    )
    assert not any("Error" in line or "zip file" in line for line in lines.values()), lines
