"""A file's document does not depend on the working directory the command ran in."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import text


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
    connection.execute(text("UPDATE documents SET source = substr(source, 6), origin = NULL WHERE collection = 't'"))
    assert _sources(connection) == ["a.md", "b.md"]
    monkeypatch.chdir(docs)
    report = indexer.index_paths(["."], collection="t")
    assert (report.rekeyed, report.unchanged, report.added) == (2, 2, 0), report.lines()
    assert _sources(connection) == ["docs/a.md", "docs/b.md"]


def test_another_folders_document_under_the_same_relative_key_is_not_taken_over(
    indexer, connection, tmp_path, monkeypatch
):
    """Folder x indexed with --root x stores ``a.md``; folder y's own ``a.md``, indexed from inside y, was taken for
    x's document under the old working-directory key: renamed to y's key and overwritten, x's text gone."""
    x, y = tmp_path / "x", tmp_path / "y"
    for folder, words in ((x, "the deploy key rotates on Mondays"), (y, "lunch is at noon")):
        folder.mkdir()
        (folder / "a.md").write_text(f"# {folder.name}\n\nTeam {folder.name}: {words}.\n")
    assert indexer.index_paths([x], collection="t", root=x).added == 1
    monkeypatch.chdir(y)
    report = indexer.index_paths(["."], collection="t")
    assert (report.added, report.updated, report.rekeyed) == (1, 0, 0), report.lines()
    assert _sources(connection) == sorted(["a.md", (y / "a.md").resolve().as_posix()])


def test_a_file_keyed_anew_by_a_git_init_or_a_root_keeps_its_document(indexer, connection, tmp_path):
    """Outside a checkout a file is keyed by its absolute path; after ``git init`` by its path in the checkout. The
    file's document was indexed again under the new key and the old one stayed searchable with the old text: a
    prune did not reach it (absolute keys lay outside every relative scope)."""
    docs = _checkout(tmp_path, git=False)
    indexer.index_paths([docs], collection="t")
    absolute = sorted(p.resolve().as_posix() for p in docs.glob("*.md"))
    assert _sources(connection) == absolute
    (tmp_path / ".git").mkdir()
    (docs / "a.md").write_text("# a\n\nChanged notes about replication slots after the checkout was made.\n")
    report = indexer.index_paths([docs], collection="t")
    assert (report.rekeyed, report.updated, report.unchanged, report.added) == (2, 1, 1, 0), report.lines()
    root = tmp_path.resolve().as_posix()
    assert _origins(connection) == {"docs/a.md": root, "docs/b.md": root}

    again = indexer.index_paths([docs], collection="t", root=docs)  # --root given: keyed below it, still one each
    assert (again.rekeyed, again.unchanged, again.added) == (2, 2, 0), again.lines()
    assert _sources(connection) == ["a.md", "b.md"]

    # a duplicate an earlier version left (the file's absolute key beside its new one) is pruned as stale
    connection.execute(
        text(
            "INSERT INTO documents (collection, source, title, content, content_hash, chunker, chunk_count) "
            "SELECT collection, :old, title, content, content_hash, chunker, 0 FROM documents "
            "WHERE collection = 't' AND source = 'b.md'"
        ),
        {"old": absolute[1]},
    )
    pruned = indexer.index_paths([docs], collection="t", root=docs, prune=True)
    assert pruned.deleted == 1 and _sources(connection) == ["a.md", "b.md"], pruned.lines()


def _origins(connection) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    rows = connection.execute(text("SELECT source, origin FROM documents WHERE collection = 't'"))
    return {source: origin for source, origin in rows}


def test_two_checkouts_sharing_keys_neither_replace_nor_prune_each_other(indexer, connection, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _checkout(tmp_path / "a")
    b = _checkout(tmp_path / "b")
    (b / "only-b.md").write_text("# b\n\nNotes only the second checkout has, about logical decoding.\n")
    assert indexer.index_paths([a], collection="t").added == 2
    clash = indexer.index_paths([b], collection="t")
    assert (clash.added, clash.updated) == (1, 0), clash.lines()
    assert sorted(f.source for f in clash.failed) == ["docs/a.md", "docs/b.md"]
    assert "another checkout" in clash.failed[0].reason and str(tmp_path / "a") in clash.failed[0].reason
    origins = _origins(connection)
    assert origins["docs/a.md"] == (tmp_path / "a").resolve().as_posix()
    assert origins["docs/only-b.md"] == (tmp_path / "b").resolve().as_posix()

    pruned = indexer.index_paths([tmp_path / "a"], collection="t", prune=True)  # the whole of checkout a
    assert pruned.deleted == 0 and "docs/only-b.md" in _sources(connection), pruned.lines()
    (a / "b.md").unlink()
    pruned = indexer.index_paths([a], collection="t", prune=True)
    assert pruned.deleted == 1 and _sources(connection) == ["docs/a.md", "docs/only-b.md"]


def test_a_moved_checkout_takes_its_keys_over_and_documents_given_as_text_are_never_pruned(
    indexer, connection, tmp_path
):
    (tmp_path / "old").mkdir()
    old = _checkout(tmp_path / "old")
    indexer.index_paths([old], collection="t")
    indexer.index_texts([("notes.md", "", "# Notes\n\nAn API note about vacuum and freezing.\n")], collection="t")
    (tmp_path / "old").rename(tmp_path / "new")
    (tmp_path / "new" / "docs" / "a.md").write_text("# a\n\nChanged notes about replication slots.\n")
    moved = indexer.index_paths([tmp_path / "new"], collection="t", prune=True)
    assert (moved.updated, moved.unchanged, moved.deleted, moved.failed) == (1, 1, 0, []), moved.lines()
    new = (tmp_path / "new").resolve().as_posix()
    assert _origins(connection) == {"docs/a.md": new, "docs/b.md": new, "notes.md": ""}


def test_a_file_whose_name_is_not_utf8_fails_alone_and_the_others_index(indexer, connection, tmp_path):
    """A Latin-1 name (an old archive, a Windows share) decodes to lone surrogates, which the database refuses:
    the first query holding its key ended the whole run with a traceback, nothing indexed."""
    docs = _checkout(tmp_path)
    os.mkdir(os.path.join(os.fsencode(docs), b"r\xe9sum\xe9s"))
    for name in (b"caf\xe9.md", b"r\xe9sum\xe9s/in.md"):
        with open(os.path.join(os.fsencode(docs), name), "w") as file:
            file.write("# Latin\n\nA page whose name is Latin-1, about a gecko.\n")
    report = indexer.index_paths([docs], collection="t", prune=True)
    assert report.added == 2 and _sources(connection) == ["docs/a.md", "docs/b.md"], report.lines()
    assert sorted(f.source for f in report.failed) == ["docs/caf\ufffd.md", "docs/r\ufffdsum\ufffds/in.md"]
    assert all("not UTF-8" in f.reason and "rename" in f.reason for f in report.failed)


def test_a_link_to_a_file_of_the_folder_leaves_its_document_as_it_is(indexer, connection, tmp_path):
    """The document of a link's target is the target read as itself: a link sorting first (``0notes.txt``) made
    it plain text titled "0notes", re-written when the link came and again when it went."""
    docs = _checkout(tmp_path)
    (docs / "guide.md").write_text("# Install guide\n\n## Steps\n\nRun the installer for the heron package.\n")
    indexer.index_paths([docs], collection="t")
    rows = "SELECT source, title, chunker, chunk_count FROM documents WHERE collection = 't' ORDER BY source"
    stored = connection.execute(text(rows)).all()
    (docs / "0notes.txt").symlink_to("guide.md")
    for given in ([docs], [docs / "0notes.txt"]):
        again = indexer.index_paths(given, collection="t")
        assert (again.added, again.updated, again.failed) == (0, 0, []), again.lines()
        assert connection.execute(text(rows)).all() == stored
    assert ("docs/guide.md", "Install guide") in [(source, title) for source, title, *_ in stored]
