"""Data safety of ingestion against a real, committing PostgreSQL: what a reindex, a prune or a commit
must never lose or bring back."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from rag_service.db.catalog import delete_by_source
from rag_service.db.database import Database
from rag_service.db.locks import lock_for_edit
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer


def _stored(db: Database, collection: str) -> dict[str, str]:
    with db.transaction() as session:
        rows = session.execute(
            text("SELECT source, content FROM documents WHERE collection = :c"), {"c": collection}
        ).all()
    return {source: content for source, content in rows}


def _paragraph(word: str) -> str:
    return f"# {word}\n\n{word} is a paragraph about write-ahead logging and crash recovery, long enough to chunk.\n"


# -- reindex --all reads a collection only under its lock -------------------------------------------------


def test_reindex_all_keeps_writes_and_deletes_committed_before_it_locked_a_collection(fresh_database, settings):
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    indexer.index_texts([("a.md", "", _paragraph("Alpha"))], collection="a")
    indexer.index_texts([("b1.md", "", _paragraph("Bravo")), ("b2.md", "", _paragraph("Bravo two"))], collection="b")
    other_writer = Indexer(fresh_database, HashingEmbedder(), settings)
    edited: list[str] = []

    def edit_b_while_a_is_reindexed(done: int, total: int | None) -> None:
        # collections go in name order: while 'a' is rewritten, 'b' is not locked yet and may change
        if not edited:
            edited.append("b1.md")
            other_writer.index_texts([("b1.md", "", _paragraph("Bravo rewritten"))], collection="b")
            with fresh_database.transaction() as session:
                lock_for_edit(session, "b")
                assert delete_by_source(session, collection="b", source="b2.md") == 1

    report = indexer.reindex_all(listener=edit_b_while_a_is_reindexed)

    assert edited, "the listener ran during the reindex"
    assert report.ok and report.updated == 2, report.lines()
    assert _stored(fresh_database, "b") == {"b1.md": _paragraph("Bravo rewritten")}, "no old text, no resurrection"
    assert _stored(fresh_database, "a") == {"a.md": _paragraph("Alpha")}


def test_reindex_all_reads_a_collection_larger_than_one_page(fresh_database, settings, monkeypatch):
    from rag_service.ingest import indexer as indexing

    monkeypatch.setattr(indexing, "REINDEX_PAGE_DOCUMENTS", 2)
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    items = [(f"doc{i}.md", "", _paragraph(f"Word{i}")) for i in range(5)]
    indexer.index_texts(items, collection="paged")
    totals: list[int | None] = []

    report = indexer.reindex_all(collection="paged", listener=lambda done, total: totals.append(total))

    assert report.ok and report.updated == 5 and totals == [5] * len(totals) and len(totals) >= 5  # start + each
    assert _stored(fresh_database, "paged") == {source: body for source, _, body in items}


# -- a prune leaves folders it could not read alone -------------------------------------------------------


PATH_MAX = os.pathconf("/", "PC_PATH_MAX")  # 4096 on Linux: longer paths are refused by the kernel


def _deep_checkout(tmp_path: Path) -> Path:
    """A checkout deep enough that one more long name passes PATH_MAX; returns its ``docs`` with ``ok.md``."""
    checkout = tmp_path
    while len(str(checkout)) < PATH_MAX - 250:
        checkout = checkout / ("d" * min(200, PATH_MAX - 240 - len(str(checkout))))
    checkout.mkdir(parents=True, exist_ok=True)
    (checkout / ".git").mkdir()
    docs = checkout / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text(_paragraph("Okay"))
    return docs


def _too_long(docs: Path) -> Path:
    """A folder below ``docs`` whose absolute path is longer than PATH_MAX, with a file in it.

    A real condition that stops ``os.walk`` as root too (root reads a mode-000 folder): listing the
    folder by its path fails with ENAMETOOLONG. Made through directory descriptors.
    """
    name = "n" * (PATH_MAX - len(str(docs)) + 8)
    assert len(name) <= 255, "the checkout is not deep enough for one more component to pass PATH_MAX"
    parent = os.open(docs, os.O_RDONLY)
    try:
        os.mkdir(name, dir_fd=parent)
        folder = os.open(name, os.O_RDONLY, dir_fd=parent)
        try:
            file = os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=folder)
            os.write(file, _paragraph("Deep").encode())
            os.close(file)
        finally:
            os.close(folder)
    finally:
        os.close(parent)
    return docs / name


def _mode_000(docs: Path) -> Path:
    """A folder below ``docs`` that its owner may not list (mode 000); only effective when not root."""
    if os.geteuid() == 0:
        pytest.skip("root reads a mode-000 folder; the path-too-long case covers root")
    folder = docs / "locked"
    folder.mkdir()
    (folder / "deep.md").write_text(_paragraph("Deep"))
    folder.chmod(0)
    return folder


@pytest.mark.parametrize("make_unreadable", [_too_long, _mode_000], ids=["path-too-long", "mode-000"])
def test_prune_keeps_documents_below_a_folder_it_could_not_read(
    fresh_database, settings, tmp_path, make_unreadable: Callable[[Path], Path]
):
    docs = _deep_checkout(tmp_path)
    unreadable = make_unreadable(docs)
    kept = f"docs/{unreadable.name}/deep.md"
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    # stored earlier (when the folder could be read), and a document whose file is really gone
    indexer.index_texts([(kept, "", _paragraph("Deep")), ("docs/gone.md", "", _paragraph("Gone"))], collection="t")
    with fresh_database.engine.begin() as conn:  # as if read from this checkout's files (texts are never pruned)
        conn.execute(text("UPDATE documents SET origin = :root"), {"root": docs.parent.resolve().as_posix()})

    try:
        report = indexer.index_paths([docs], collection="t", prune=True)
    finally:
        if make_unreadable is _mode_000:
            unreadable.chmod(stat.S_IRWXU)

    assert report.added == 1 and report.deleted == 1, report.lines()
    assert set(_stored(fresh_database, "t")) == {"docs/ok.md", kept}
    [problem] = report.skipped
    assert problem.source == f"docs/{unreadable.name}"
    assert problem.reason.startswith("folder could not be read (") and "not pruned" in problem.reason
    assert "make it readable" in problem.reason


def test_prune_of_a_path_it_cannot_read_deletes_nothing(fresh_database, settings, tmp_path):
    unreadable = _too_long(_deep_checkout(tmp_path))
    kept = f"docs/{unreadable.name}/deep.md"
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    indexer.index_texts([(kept, "", _paragraph("Deep"))], collection="t")

    report = indexer.index_paths([unreadable], collection="t", prune=True)

    assert (report.added, report.deleted, report.failed) == (0, 0, []), report.lines()
    assert set(_stored(fresh_database, "t")) == {kept}
    [problem] = report.skipped
    assert problem.source == f"docs/{unreadable.name}" and problem.reason.startswith("path could not be read (")


# -- the checkout root as the prune scope ------------------------------------------------------------------


def _rag(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rag_service.cli", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.multiprocess
def test_cli_prune_from_the_checkout_root_prunes_the_whole_checkout(database_factory, tmp_path):
    env = dict(os.environ)
    env.update(
        RAG_DATABASE_URL=database_factory.create("rag_prune"),
        RAG_EMBEDDING_MODEL="hashing",
        RAG_RERANK_MODEL="none",
        RAG_DATA_DIR=str(tmp_path / "data"),
    )
    assert _rag(env, "db", "upgrade", cwd=tmp_path).returncode == 0
    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "docs").mkdir()
    (checkout / "docs" / "a.md").write_text(_paragraph("Alpha"))
    (checkout / "docs" / "b.md").write_text(_paragraph("Bravo"))
    (checkout / "top.md").write_text(_paragraph("Top"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.md").write_text(_paragraph("Outside"))  # outside the checkout: stored by absolute path

    first = _rag(env, "reindex", ".", "../elsewhere", "--collection", "kb", "--quiet", cwd=checkout)
    assert first.returncode == 0 and "4 added" in first.stdout, first.stdout + first.stderr
    (checkout / "docs" / "b.md").unlink()
    (checkout / "top.md").unlink()

    pruned = _rag(env, "reindex", ".", "--collection", "kb", "--prune", "--json", "--quiet", cwd=checkout)
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert json.loads(pruned.stdout)["deleted"] == 2, pruned.stdout
    (checkout / "docs" / "a.md").unlink()
    with_root = _rag(
        env, "reindex", str(checkout), "--root", str(checkout), "--collection", "kb", "--prune", "--quiet", cwd=tmp_path
    )
    assert with_root.returncode == 0 and "1 deleted" in with_root.stdout, with_root.stdout + with_root.stderr
    listed = _rag(env, "query", "Outside", "--collection", "kb", "--json", cwd=tmp_path)
    assert str(outside / "x.md") in listed.stdout, "a document outside the checkout is not in its scope"


# -- commits are synchronous whatever the database sets ---------------------------------------------------


def test_ingest_commits_synchronously_where_the_database_turned_it_off(fresh_database, settings):
    engine = fresh_database.engine
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE commit_modes (source text, mode text)"))
        conn.execute(
            text(
                "CREATE FUNCTION record_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO commit_modes VALUES (NEW.source, current_setting('synchronous_commit')); "
                "RETURN NEW; END $$"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER record_commit_mode AFTER INSERT OR UPDATE ON documents "
                "FOR EACH ROW EXECUTE FUNCTION record_commit_mode()"
            )
        )
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)

    def index_with_database_setting(mode: str, source: str) -> str:
        with engine.begin() as conn:
            conn.execute(text(f'ALTER DATABASE "{engine.url.database}" SET synchronous_commit = {mode}'))
        engine.dispose()  # new connections start with the database's setting
        with engine.connect() as conn:
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == mode
        assert indexer.index_texts([(source, "", _paragraph("Durable"))], collection="t").added == 1
        with engine.connect() as conn:
            recorded = conn.execute(text("SELECT DISTINCT mode FROM commit_modes WHERE source = :s"), {"s": source})
            return str(recorded.scalar_one())  # the document's write and its origin's

    assert index_with_database_setting("off", "off.md") == "on"
    assert index_with_database_setting("remote_apply", "stronger.md") == "remote_apply", "a stronger setting stays"
