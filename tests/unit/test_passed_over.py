"""A walk over a code checkout passes over what git ignores (``.gitignore``, ``.git/info/exclude``, the global
excludes file), ``node_modules``, virtualenvs and lock files, and lists them by kind; a path named explicitly is
read anyway; hidden entries and ``__pycache__`` stay passed over silently (audit 56b, D9). Real git throughout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rag_service.git_tracked import git_said
from rag_service.ingest.loaders import discover


def write(path: Path, text: str = "text\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git work tree like audit 56b's: sources, vendored and built trees, a virtualenv, lock files, a global
    excludes file (``GIT_CONFIG_GLOBAL``) and ``.git/info/exclude``."""
    tmp_path = tmp_path.resolve()
    ignore = write(tmp_path / "global-ignore", "*.swp.md\n")
    write(tmp_path / "gitconfig", f"[core]\n\texcludesFile = {ignore}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "repo")
    write(repo / ".gitignore", "build/\ndist/\n*.so\n__pycache__/\nenv/\n")
    write(repo / ".git" / "info" / "exclude", "scratch/\n")
    for rel in ["src/app.py", "README.md", "build/lib/app.py", "dist/app.js", "src/native.so", "scratch/notes.md",
                "src/draft.swp.md", "node_modules/semver/index.js", "web/node_modules/x/index.js", "env/lib/site.py",
                "tools/venv/lib/site.py", "package-lock.json", "poetry.lock", "web/yarn.lock", "web/pnpm-lock.yaml",
                "src/__pycache__/app.md", ".venv/lib/site.py", "src/.hidden.md"]:  # fmt: skip
        write(repo / rel)
    write(repo / "env" / "pyvenv.cfg", "home = /usr/bin\n")
    write(repo / "tools" / "venv" / "pyvenv.cfg", "home = /usr/bin\n")
    return repo


def _relative(repo: Path, passed: dict[str, list[Path]]) -> dict[str, list[str]]:
    return {kind: sorted(p.relative_to(repo).as_posix() for p in paths) for kind, paths in passed.items()}


def test_a_checkout_is_read_without_what_git_ignores_vendored_trees_virtualenvs_and_lock_files(checkout: Path):
    found = discover([checkout])
    assert sorted(p.relative_to(checkout).as_posix() for p in found.files) == ["README.md", "src/app.py"]
    assert _relative(checkout, found.passed_over) == {
        "git_folder": ["build", "dist", "env", "scratch"],  # .gitignore and .git/info/exclude
        "git_file": ["src/draft.swp.md", "src/native.so"],  # the global excludes file, *.so
        "node_modules": ["node_modules", "web/node_modules"],
        "virtualenv": ["tools/venv"],
        "lock_file": ["package-lock.json", "poetry.lock", "web/pnpm-lock.yaml", "web/yarn.lock"],
    }
    assert found.skipped == [] and found.problems == [], "hidden entries and __pycache__: silently, as before"


def test_a_path_named_explicitly_is_read_even_if_passed_over(checkout: Path):
    named = [checkout / "build", checkout / "node_modules" / "semver", checkout / "poetry.lock", checkout / "src"]
    found = discover(named)
    assert sorted(p.relative_to(checkout).as_posix() for p in found.files) == [
        "build/lib/app.py",  # a folder git ignores, named: read whole
        "node_modules/semver/index.js",
        "src/app.py",
    ]
    assert [(p.name, r.split(";")[0]) for p, r in found.skipped] == [("poetry.lock", "unsupported file type '.lock'")]
    assert _relative(checkout, found.passed_over) == {"git_file": ["src/draft.swp.md", "src/native.so"]}
    assert discover([checkout / "dist" / "app.js"]).files == [checkout / "dist" / "app.js"]


def test_a_tracked_file_is_read_whatever_the_ignore_patterns(checkout: Path):
    git(checkout, "add", "-f", "dist/app.js")
    found = discover([checkout])
    assert checkout / "dist" / "app.js" in found.files, "git ignores untracked files only"
    assert "dist" not in _relative(checkout, found.passed_over)["git_folder"]


def test_a_nested_checkout_is_read_by_its_own_ignores(checkout: Path):
    inner = checkout / "vendor" / "lib"
    git(checkout, "init", "-q", "vendor/lib")
    write(inner / ".gitignore", "generated/\n")
    write(inner / "generated" / "out.py")
    write(inner / "lib.py")
    found = discover([checkout])
    assert inner / "lib.py" in found.files and inner / "generated" / "out.py" not in found.files
    assert "vendor/lib/generated" in _relative(checkout, found.passed_over)["git_folder"]


def test_outside_git_vendored_trees_virtualenvs_and_lock_files_are_still_passed_over(tmp_path: Path):
    for rel in ["app.py", "node_modules/x/index.js", "venv/lib/site.py", "Cargo.lock", "build/out.py"]:
        write(tmp_path / rel)
    write(tmp_path / "venv" / "pyvenv.cfg", "home = /usr/bin\n")
    found = discover([tmp_path])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found.files) == ["app.py", "build/out.py"]
    assert _relative(tmp_path, found.passed_over) == {
        "node_modules": ["node_modules"],
        "virtualenv": ["venv"],
        "lock_file": ["Cargo.lock"],
    }


def test_a_folder_named_git_that_is_no_work_tree_ignores_nothing(tmp_path: Path):
    (tmp_path / ".git").mkdir()  # as many tests make a "checkout"
    write(tmp_path / ".gitignore", "build/\n")
    write(tmp_path / "build" / "out.py")
    found = discover([tmp_path])
    assert found.files == [tmp_path / "build" / "out.py"] and found.problems == []


def test_a_link_into_a_folder_git_ignores_is_not_followed(checkout: Path):
    (checkout / "src" / "latest.py").symlink_to(checkout / "build" / "lib" / "app.py")
    found = discover([checkout])
    assert checkout / "build" / "lib" / "app.py" not in found.files
    [(link, reason)] = found.skipped
    assert link == checkout / "src" / "latest.py"
    assert reason.startswith(f"a symbolic link to {checkout / 'build' / 'lib' / 'app.py'}, which a walk passes over")


def test_without_git_a_checkout_is_read_as_before_and_the_run_says_so(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    found = discover([checkout])
    assert checkout / "build" / "lib" / "app.py" in found.files
    assert "git_folder" not in found.passed_over and "node_modules" in found.passed_over
    assert found.problems == [f"what git ignores in {checkout} is not known (git is not installed); it was indexed"]


def test_a_documentation_tools_output_beside_its_sources_is_passed_over_unless_named(tmp_path: Path):
    """A Sphinx project's _build/html stored every page two or three times (html, _sources/*.rst.txt) and its copies
    took 67 of 95 result slots when git did not ignore it (audit 59b); Antora and MkDocs sites alike."""
    for rel in ["docs/index.rst", "docs/_build/html/index.html", "docs/_build/html/_sources/index.rst.txt",
                "docs/_build/doctrees/index.doctree", "site/build/site/guide/index.html", "mk/site/index.html"]:
        write(tmp_path / rel)  # fmt: skip
    write(tmp_path / "docs/_build/html/.buildinfo", "# Sphinx build info version 1\n")
    write(tmp_path / "docs/_build/doctrees/environment.pickle")
    write(tmp_path / "site/build/site/_/js/site.js")
    write(tmp_path / "mk/site/search/search_index.json", "{}")
    found = discover([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in found.files] == ["docs/index.rst"]
    assert _relative(tmp_path, found.passed_over) == {
        "docs_build": ["docs/_build/doctrees", "docs/_build/html", "mk/site", "site/build/site"]
    }
    write(tmp_path / "docs/conf.py", "project = 'x'\n")
    write(tmp_path / "docs/_templates/layout.html", "{% extends '!layout.html' %}\n")
    write(tmp_path / "docs/_static/custom.css", "body { color: red }\n")
    write(tmp_path / "other/_static/notes.md")  # no conf.py beside it: a folder like any other
    found = discover([tmp_path])
    assert _relative(tmp_path, found.passed_over)["docs_theme"] == ["docs/_static", "docs/_templates"]
    assert tmp_path / "other/_static/notes.md" in found.files
    named = discover([tmp_path / "docs" / "_build" / "html"])  # naming the site indexes it, as any folder
    assert tmp_path / "docs/_build/html/index.html" in named.files


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a checkout away needs root")
def test_a_checkout_owned_by_another_user_is_read_with_what_git_ignores(checkout: Path):
    """git refused a checkout mounted or unpacked as another user ("dubious ownership"); its git-ignored build was
    indexed and the line quoted git's suggested command instead of the reason (audit 59b)."""
    for path in [checkout, *checkout.rglob("*")]:
        os.lchown(path, 1001, 1001)
    found = discover([checkout])
    assert found.problems == []
    assert checkout / "build" / "lib" / "app.py" not in found.files


def test_a_git_failure_is_told_by_its_fatal_line():
    said = (
        b"fatal: detected dubious ownership in repository at '/x'\nTo add an exception for this directory, call:\n"
        b"\n\tgit config --global --add safe.directory /x\n"
    )
    done = subprocess.CompletedProcess(["git"], 128, b"", said)
    assert git_said(done) == "fatal: detected dubious ownership in repository at '/x'"
    assert git_said(subprocess.CompletedProcess(["git"], 2, b"", b"")) == "git exited 2"
