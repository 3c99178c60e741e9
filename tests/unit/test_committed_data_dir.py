"""A checkout's committed embedded database is never started (``rag_service.db.embedded``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rag_service.db.embedded import start_embedded_server
from rag_service.errors import ConfigurationError


def _checkout_with_database(folder: Path, *, commit: bool) -> Path:
    """A git checkout holding ``.rag_data/pg`` with a server configuration that would run a command at start."""
    pgdata = folder / ".rag_data" / "pg"
    pgdata.mkdir(parents=True)
    (pgdata / "PG_VERSION").write_text("18\n")
    (pgdata / "postgresql.auto.conf").write_text("restore_command = 'touch ran'\n")
    (pgdata / "recovery.signal").write_text("")
    git = ["git", "-C", str(folder), "-c", "user.name=a", "-c", "user.email=a@b.c"]
    subprocess.run([*git, "init", "-q"], check=True)
    if commit:
        subprocess.run([*git, "add", "-f", ".rag_data"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "a database"], check=True)
    return folder / ".rag_data"


def test_a_committed_database_is_refused_in_one_line(tmp_path: Path) -> None:
    """``rag query`` in a cloned repository started the ``.rag_data/pg`` it came with: a ``restore_command``
    with ``recovery.signal`` runs as the server starts. git drops the permissions PostgreSQL needs, so a clone
    failed with the generic "did not start" line; an archive keeping them would have run the command."""
    data_dir = _checkout_with_database(tmp_path, commit=True)
    with pytest.raises(ConfigurationError) as refused:
        start_embedded_server(data_dir)
    message = str(refused.value)
    assert "\n" not in message
    assert f"{data_dir.resolve() / 'pg'} is committed to the git checkout" in message
    assert "RAG_DATA_DIR" in message and "git rm -r --cached" in message


def test_an_untracked_database_in_a_checkout_is_asked_about_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One's own ``.rag_data`` beside a checkout's files (git-ignored or just untracked) passes the check."""
    from rag_service.db import embedded

    data_dir = _checkout_with_database(tmp_path, commit=False)
    embedded._check_not_committed(data_dir / "pg")  # no error
    monkeypatch.setattr(embedded, "git_tracks", lambda path: "git failed: it could not say")
    embedded._check_not_committed(data_dir / "pg")  # git unable to say is no reason to refuse one's own data
