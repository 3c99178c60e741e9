"""`rag reindex` refuses options it would ignore and reports a mistyped PATH as a user error."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_cli import cli_env, rag  # noqa: F401  (fixture and helper)

pytestmark = pytest.mark.multiprocess


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (("docs",), "PATH"),
        (("--strategy", "markdown"), "--strategy"),
        (("--prune",), "--prune"),
        (("--force",), "--force"),
        (("--root", "."), "--root"),
        (("docs", "--prune", "--force"), "PATH, --prune, --force"),
    ],
)
def test_all_with_path_options_is_a_usage_error(cli_env, tmp_path, options, named):  # noqa: F811
    result = rag(cli_env, "reindex", "--all", "--quiet", *options, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --all re-chunks"), result.stderr
    assert f"takes none of {named};" in lines[0]
    assert result.stdout == "", "nothing was re-indexed"


def test_a_mistyped_path_is_exit_1_and_the_others_are_indexed(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / ".git").mkdir()
    (tmp_path / "guide.md").write_text("# Guide\n\nThe harbour guide explains the tides and the berths.\n")
    result = rag(cli_env, "reindex", "guide.md", "gudie.md", "--quiet", "--json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["added"] == 1, "the existing path was indexed"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PATH 'gudie.md' does not exist"), result.stderr
    two = rag(cli_env, "reindex", "nowhere", "gudie.md", "--quiet", cwd=tmp_path)
    assert two.returncode == 1 and "PATHs 'nowhere', 'gudie.md' do not exist" in two.stderr
    assert "skipped: gudie.md: does not exist" in two.stdout, "the report still lists them"


def test_prune_of_a_removed_path_is_no_error(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / ".git").mkdir()
    old = tmp_path / "old.md"
    old.write_text("# Old\n\nAn old page about the lighthouse keeper and the lamp.\n")
    assert rag(cli_env, "reindex", "old.md", "--quiet", cwd=tmp_path).returncode == 0
    old.unlink()
    pruned = rag(cli_env, "reindex", "old.md", "--prune", "--quiet", "--json", cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["deleted"] == 1


def test_a_root_that_is_missing_or_does_not_hold_the_paths_is_a_usage_error(cli_env, tmp_path):  # noqa: F811
    (tmp_path / "c2").mkdir()
    (tmp_path / "c2" / "guide.md").write_text("# Guide\n\nThe harbour guide explains the tides.\n")
    (tmp_path / "elsewhere").mkdir()
    missing = rag(cli_env, "reindex", "c2", "--collection", "t2", "--root", "/nonexistent", "--quiet", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stdout == "", "nothing was indexed"
    assert missing.stderr.strip().splitlines() == [
        "error: --root /nonexistent does not exist; give the folder the stored sources are relative to"
    ]
    outside = rag(cli_env, "reindex", "c2", "--collection", "t2", "--root", "elsewhere", "--quiet", cwd=tmp_path)
    assert outside.returncode == 2 and outside.stdout == ""
    assert outside.stderr.strip().splitlines() == [
        "error: c2 is not under --root elsewhere; give paths inside it, or another --root"
    ]


def test_named_files_all_of_an_unsupported_type_are_an_error_a_folder_of_them_is_not(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / ".git").mkdir()
    (tmp_path / "c2").mkdir()
    (tmp_path / "c2" / "app.log").write_text("12:00 started\n")
    (tmp_path / "c2" / "guide.md").write_text("# Guide\n\nThe harbour guide explains the tides and the berths.\n")
    alone = rag(cli_env, "reindex", "c2/app.log", "--quiet", cwd=tmp_path)
    assert alone.returncode == 2 and alone.stdout == "", alone.stderr
    lines = alone.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot index c2/app.log: file type '.log' is not supported")
    assert ".md" in lines[0] and "dockerfile" in lines[0], "the supported types are named"
    beside = rag(cli_env, "reindex", "c2/app.log", "c2/guide.md", "--quiet", cwd=tmp_path)
    assert beside.returncode == 0 and "skipped: c2/app.log" in beside.stdout, beside.stderr
    folder = rag(cli_env, "reindex", "c2", "--quiet", cwd=tmp_path)
    assert folder.returncode == 0 and "skipped: c2/app.log" in folder.stdout, folder.stderr
