"""A file's document does not depend on the working directory the command ran in."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer


@pytest.fixture
def indexer(db, settings) -> Indexer:
    return Indexer(db, HashingEmbedder(), settings)


def _checkout(root: Path, *, git: bool = True) -> Path:
    if git:
        (root / ".git").mkdir()
    docs = root / "docs"
    docs.mkdir()
    for name in ("a", "b"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nNotes {name} about streaming replication and failover slots.\n")
    return docs


def _sources(connection) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(connection.execute(text("SELECT source FROM documents WHERE collection = 't'")).scalars())


def test_the_same_files_from_two_working_directories_are_one_set_of_documents(
    indexer, connection, tmp_path, monkeypatch
):
    docs = _checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert indexer.index_paths(["docs"], collection="t").added == 2
    monkeypatch.chdir(docs)
    again = indexer.index_paths(["."], collection="t")
    assert (again.added, again.unchanged) == (0, 2), again.lines()
    assert _sources(connection) == ["docs/a.md", "docs/b.md"]

    (docs / "b.md").unlink()
    pruned = indexer.index_paths(["."], collection="t", prune=True)  # from docs/, what docs/ indexed
    assert pruned.deleted == 1 and _sources(connection) == ["docs/a.md"]


def test_outside_a_checkout_sources_are_absolute_and_an_explicit_root_wins(indexer, connection, tmp_path, monkeypatch):
    docs = _checkout(tmp_path, git=False)
    monkeypatch.chdir(docs)
    indexer.index_paths(["a.md"], collection="t")
    assert _sources(connection) == [(docs / "a.md").resolve().as_posix()]
    indexer.index_paths([docs / "b.md"], collection="t", root=tmp_path)
    assert "docs/b.md" in _sources(connection)


def test_documents_under_old_working_directory_keys_are_rekeyed_not_duplicated(
    indexer, connection, tmp_path, monkeypatch
):
    docs = _checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    indexer.index_paths(["docs"], collection="t")
    # what earlier versions stored when run from docs/: keys relative to the working directory
    connection.execute(text("UPDATE documents SET source = substr(source, 6) WHERE collection = 't'"))
    assert _sources(connection) == ["a.md", "b.md"]
    monkeypatch.chdir(docs)
    report = indexer.index_paths(["."], collection="t")
    assert (report.rekeyed, report.unchanged, report.added) == (2, 2, 0), report.lines()
    assert _sources(connection) == ["docs/a.md", "docs/b.md"]
