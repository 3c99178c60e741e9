"""Which stored documents a pruning run deletes: the scope's unseen ones, never those below an
unreadable folder, and with the root scope ``"."`` every relative source but no absolute one; how a link is keyed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_service.errors import ConfigurationError
from rag_service.ingest.source_keys import ROOT_SOURCE, check_root, is_pruned, source_for


def test_an_unseen_document_in_a_scope_folder_is_pruned_and_a_seen_one_kept() -> None:
    assert is_pruned("docs/old.md", scope=[("docs", None)], seen={"docs/new.md"}, unreadable=[])
    assert not is_pruned("docs/new.md", scope=[("docs", None)], seen={"docs/new.md"}, unreadable=[])


def test_a_folder_scope_is_a_path_prefix_not_a_string_prefix() -> None:
    assert not is_pruned("docs-old/a.md", scope=[("docs", None)], seen=set(), unreadable=[])
    assert is_pruned("docs/sub/a.md", scope=[("docs/", None)], seen=set(), unreadable=[])
    assert is_pruned("notes.md", scope=[("notes.md", None)], seen=set(), unreadable=[]), "a file given itself, gone"


def test_the_root_scope_holds_every_relative_source_and_no_absolute_one() -> None:
    assert is_pruned("anywhere/a.md", scope=[(ROOT_SOURCE, None)], seen=set(), unreadable=[])
    assert not is_pruned("/elsewhere/a.md", scope=[(ROOT_SOURCE, None)], seen=set(), unreadable=[])


def test_documents_at_or_below_an_unreadable_folder_are_kept() -> None:
    assert not is_pruned("docs/locked/a.md", scope=[("docs", None)], seen=set(), unreadable=["docs/locked"])
    assert not is_pruned("docs/locked", scope=[("docs", None)], seen=set(), unreadable=["docs/locked"])
    assert is_pruned("docs/open/a.md", scope=[("docs", None)], seen=set(), unreadable=["docs/locked"])
    assert not is_pruned("a.md", scope=[(ROOT_SOURCE, None)], seen=set(), unreadable=[ROOT_SOURCE])


def test_a_link_is_keyed_by_its_target_unless_it_was_not_followed(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    (tmp_path / "docs").mkdir()
    (tmp_path / "secret.md").write_text("x")
    link = tmp_path / "docs" / "passwd.md"
    link.symlink_to(tmp_path / "secret.md")
    assert source_for(link, tmp_path) == "secret.md"
    assert source_for(link, tmp_path, follow_link=False) == "docs/passwd.md"  # how a report names a skipped link


def test_a_prune_keeps_another_checkouts_documents_and_documents_given_as_text() -> None:
    scope = [(ROOT_SOURCE, "/src/a")]
    assert is_pruned("docs/gone.md", origin="/src/a", scope=scope, seen=set(), unreadable=[])
    assert not is_pruned("docs/gone.md", origin="/src/b", scope=scope, seen=set(), unreadable=[]), "b's document"
    assert not is_pruned("notes.md", origin="", scope=scope, seen=set(), unreadable=[]), "a text, not a file"
    assert is_pruned("docs/gone.md", origin=None, scope=scope, seen=set(), unreadable=[]), "not known: as before"
    assert not is_pruned("docs/x.md", origin="/src/b", scope=[("docs", "/src/a")], seen=set(), unreadable=[])


def test_a_root_that_is_missing_or_does_not_hold_the_paths_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "r" / "docs").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    check_root(tmp_path / "r", [tmp_path / "r" / "docs", tmp_path / "r"])
    with pytest.raises(ConfigurationError, match=r"^--root /nonexistent does not exist; give the folder"):
        check_root("/nonexistent", [tmp_path / "r"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match=r"file is not a folder"):
        check_root(tmp_path / "file", [tmp_path / "r"])
    with pytest.raises(ConfigurationError) as err:
        check_root(tmp_path / "r", [tmp_path / "r" / "docs", tmp_path / "other"])
    assert str(err.value) == (
        f"{tmp_path / 'other'} is not under --root {tmp_path / 'r'}; give paths inside it, or another --root"
    )
