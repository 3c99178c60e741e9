"""`rag reindex` of a whole code checkout (audit 56b, D9 and D10): what git ignores, vendored and virtualenv
folders and lock files are passed over and said so in one line; minified files are skipped, not failed, so the
run exits 0; a real read error still fails it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.integration.test_cli import cli_env, rag  # noqa: F401  (fixture and helper)

pytestmark = pytest.mark.multiprocess

#: one dense line of 15,000 characters: a bundle
BUNDLE = "".join(f"function a{i}(b,c){{return b*{i}+c}}var x{i}=a{i}(1,2);" for i in range(300))[:15_000] + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def git_init(folder: Path) -> None:
    """A real git work tree (no commit needed: ignores apply to untracked files)."""
    subprocess.run(["git", "init", "-q", str(folder)], check=True, capture_output=True)


def test_a_checkout_with_a_minified_bundle_exits_0_and_says_it_was_skipped(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    repo = tmp_path / "repo"
    git_init(repo)
    write(repo / "src" / "app.py", "def main():\n    '''Start the harbour app.'''\n    return 0\n")
    write(repo / "dist" / "bundle.js", BUNDLE)
    done = rag(cli_env, "reindex", "repo", "--collection", "repo", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 added, 0 updated, 0 unchanged, 0 deleted, 0 failed, 1 skipped" in done.stdout
    assert "skipped: dist/bundle.js: has 100% of its text in dense lines" in done.stdout
    assert "minified or generated code is not indexed; index its source instead" in done.stdout
    again = rag(cli_env, "reindex", "repo", "--collection", "repo", "--quiet", "--json", cwd=tmp_path)
    assert again.returncode == 0, "and on every later run"
    assert json.loads(again.stdout)["failed"] == []


def test_a_real_read_error_still_fails_the_run(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    repo = tmp_path / "repo"
    git_init(repo)
    write(repo / "dist" / "bundle.js", BUNDLE)
    (repo / "notes.md").write_bytes(b"# Notes\n\ncaf\xe9 au lait\n")  # Latin-1, not UTF-8
    done = rag(cli_env, "reindex", "repo", "--collection", "repo", "--quiet", cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert "0 added, 0 updated, 0 unchanged, 0 deleted, 1 failed, 1 skipped" in done.stdout
    assert "failed: notes.md: " in done.stdout


def audit_checkout(root: Path) -> Path:
    """A small checkout like audit 56b's: sources, and what a build, npm and a virtualenv leave beside them."""
    repo = root / "repo"
    git_init(repo)
    write(repo / ".gitignore", "node_modules/\nvenv/\nbuild/\ndist/\n__pycache__/\n")
    source = "def get_best_encoding(stream):\n    '''The encoding the harbour stream uses.'''\n    return 'utf-8'\n"
    write(repo / "src" / "app" / "_compat.py", source)
    write(repo / "build" / "lib" / "app" / "_compat.py", source)  # a build copy, identical
    write(repo / "node_modules" / "semver" / "index.js", "module.exports = function satisfies(v) { return v }\n")
    write(repo / "venv" / "pyvenv.cfg", "home = /usr/bin\n")
    write(repo / "venv" / "lib" / "idna.py", "def encode(label):\n    return label\n")
    write(repo / "dist" / "bundle.js", BUNDLE)
    write(repo / "package-lock.json", '{"name": "harbour", "lockfileVersion": 3}\n')
    write(repo / "poetry.lock", "[[package]]\nname = 'idna'\n")
    return repo


def test_index_paths_passes_over_what_git_ignores_and_lock_files_in_one_line(indexer, db, tmp_path):
    repo = audit_checkout(tmp_path)
    report = indexer.index_paths([repo], collection="repo")
    assert (report.added, report.failed, report.skipped) == (1, [], [])
    assert report.passed_over == {
        "git_folder": ["build/", "dist/", "node_modules/", "venv/"],
        "lock_file": ["package-lock.json", "poetry.lock"],
    }
    assert (
        "passed over: 4 folders git ignores (build/, dist/, node_modules/ and 1 more), 2 lock files "
        "(package-lock.json, poetry.lock); name a path to index it anyway"
    ) in report.lines()
    with db.transaction() as session:
        sources = session.execute(text("SELECT source FROM documents WHERE collection = 'repo'")).scalars().all()
    assert sources == ["src/app/_compat.py"], "the build copy can no longer stand in for the source"
    named = indexer.index_paths([repo / "build", repo / "package-lock.json"], collection="repo")
    assert named.added == 2 and named.passed_over == {}, "a path named is indexed even if ignored"


def test_rag_reindex_of_a_checkout_says_what_it_passed_over_and_exits_0(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    audit_checkout(tmp_path)
    done = rag(cli_env, "reindex", "repo", "--collection", "repo", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 added, 0 updated, 0 unchanged, 0 deleted, 0 failed, 0 skipped" in done.stdout
    [line] = [line for line in done.stdout.splitlines() if line.startswith("passed over:")]
    assert line.startswith("passed over: 4 folders git ignores (build/, dist/, node_modules/ and 1 more)")


def _stored(db) -> list[str]:
    with db.transaction() as session:
        return session.execute(text("SELECT source FROM documents ORDER BY source")).scalars().all()


def test_documents_of_a_path_passed_over_now_are_named_and_pruned_like_gone_files(indexer, db, tmp_path):
    """A build/ indexed before it was ignored, and a file that became a bundle: stale copies of nothing a run
    would index now. Without --prune they stay searchable and are named (not as gone: the files are there);
    with --prune they are deleted as a removed file is."""
    repo = audit_checkout(tmp_path)
    (repo / ".gitignore").write_text("node_modules/\nvenv/\ndist/\n")  # build/ not ignored yet
    app = write(repo / "web" / "app.js", "function harbour(tide) {\n  return tide + 1;\n}\n")
    old = write(repo / "docs" / "old.md", "# Old\n\nThe old lighthouse keeper's notes.\n")
    first = indexer.index_paths([repo], collection="repo")
    assert first.added == 4
    assert _stored(db) == ["build/lib/app/_compat.py", "docs/old.md", "src/app/_compat.py", "web/app.js"]
    (repo / ".gitignore").write_text("node_modules/\nvenv/\ndist/\nbuild/\n")
    app.write_text(BUNDLE)  # the source replaced by its bundle
    old.unlink()
    kept = indexer.index_paths([repo], collection="repo")
    assert (kept.deleted, kept.gone, kept.left_out) == (0, ["docs/old.md"], ["build/lib/app/_compat.py", "web/app.js"])
    assert [p.source for p in kept.skipped] == ["web/app.js"] and kept.failed == []
    assert (
        "2 stored documents' files are passed over or skipped now: build/lib/app/_compat.py, web/app.js; still "
        "searchable in their previous version; run with --prune to delete them"
    ) in kept.lines()
    assert "1 stored document's file is gone: docs/old.md; run with --prune to delete it" in kept.lines()
    assert "web/app.js" in _stored(db) and "build/lib/app/_compat.py" in _stored(db)
    pruned = indexer.index_paths([repo], collection="repo", prune=True)
    assert (pruned.deleted, pruned.gone, pruned.left_out) == (3, [], [])
    assert _stored(db) == ["src/app/_compat.py"]
    again = indexer.index_paths([repo], collection="repo", prune=True)
    assert (again.deleted, again.unchanged, again.left_out) == (0, 1, [])
