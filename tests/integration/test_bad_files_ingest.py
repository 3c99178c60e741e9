"""One file a reader or chunker cannot take fails alone: one ``failed:`` line naming it, the good files
beside it indexed, the run's report not ``ok``; a lost database still ends the run (audit 47)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ResourceClosedError

from rag_service.ingest.chunking import Chunking
from tests.unit.test_bad_files import docx_with_zip_method, filtered_pdf


@pytest.fixture
def crash(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # sources are relative to the checkout root
    folder = tmp_path / "crash"
    folder.mkdir()
    (folder / "verydeep.json").write_text("[" * 700 + '"x"' + "]" * 700)
    filtered_pdf(folder / "badfilter.pdf", b"/FooDecode")
    docx_with_zip_method(folder / "packed.docx", 9)
    (folder / "fine.md").write_text("# Fine\n\nHerons return to the colony in late March.\n")
    (folder / "bug.md").write_text("# Bug\n\nA file our own chunking code fails on.\n")
    return folder


def _failing_split(real):
    def split(self, strategy: str, text: str, source: str, title: str = ""):
        if source.endswith("bug.md"):
            raise IndexError("list index out of range")
        return real(self, strategy, text, source, title)

    return split


def test_each_bad_file_is_one_failed_line_and_the_rest_is_indexed(indexer, crash, db, monkeypatch):
    monkeypatch.setattr(Chunking, "split", _failing_split(Chunking.split))
    report = indexer.index_paths([crash], collection="crash1", progress=False)
    failed = {p.source: p.reason for p in report.failed}
    assert set(failed) == {"crash/verydeep.json", "crash/badfilter.pdf", "crash/packed.docx", "crash/bug.md"}
    assert failed["crash/verydeep.json"] == "JSON nested more than 500 levels deep (line 1 column 501); flatten it"
    assert failed["crash/badfilter.pdf"].startswith("not a readable PDF (Unsupported filter /FooDecode)")
    assert "compression method" in failed["crash/packed.docx"]
    assert failed["crash/bug.md"].startswith("could not be indexed (IndexError: list index out of range)")
    assert all("\n" not in reason for reason in failed.values())
    assert report.added == 1 and not report.ok
    with db.transaction() as session:
        assert session.execute(text("SELECT source FROM documents")).scalars().all() == ["crash/fine.md"]


def test_a_database_error_met_while_chunking_still_ends_the_run(indexer, crash, monkeypatch):
    def split(self, strategy: str, text: str, source: str, title: str = ""):
        raise ResourceClosedError("This Connection is closed")

    monkeypatch.setattr(Chunking, "split", split)
    with pytest.raises(ResourceClosedError):
        indexer.index_paths([crash / "fine.md"], collection="crash2", progress=False)


def test_a_changed_file_that_fails_says_its_previous_version_is_kept(indexer, crash, db, monkeypatch):
    data = crash / "data.json"
    data.write_text('{"colony": "heron", "nests": 412}')
    old = [data, crash / "fine.md", crash / "bug.md"]
    assert indexer.index_paths(old, collection="kept", progress=False).added == 3
    data.write_text('{"colony": "heron", "nests": 412,}')  # broken by an edit
    (crash / "fine.md").write_text("# Fine\n\nHerons return in late March, and leave in October.\n")
    (crash / "bug.md").write_text("# Bug\n\nAn edit our own chunking code fails on.\n")
    (crash / "new").mkdir()
    (crash / "new" / "bug.md").write_text("# Bug\n\nA new file our own chunking code fails on.\n")
    monkeypatch.setattr(Chunking, "split", _failing_split(Chunking.split))
    report = indexer.index_paths([*old, crash / "new" / "bug.md"], collection="kept")
    failed = {p.source: p.reason for p in report.failed}
    assert failed["crash/data.json"].startswith("not valid JSON (line 1 column 34")
    assert failed["crash/data.json"].endswith("; fix the syntax; its previous version stays indexed")
    assert failed["crash/bug.md"].endswith("report it; its previous version stays indexed")
    assert not failed["crash/new/bug.md"].endswith("stays indexed"), "a new file had no previous version"
    assert report.updated == 1
    with db.transaction() as session:
        stored = session.execute(text("SELECT content FROM documents WHERE source = 'crash/data.json'")).scalar_one()
    assert stored == '{"colony": "heron", "nests": 412}'
