"""A ``.env`` someone committed cannot grant access or send data elsewhere (``rag_service.envfile``)."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from rag_service import envfile
from rag_service.config import load_settings
from rag_service.server.config import load_server_config

DOTENV = """\
RAG_API_TOKEN=attackers-known-token
RAG_API_CORS_ORIGINS=["https://attacker.example"]
RAG_LLM_BASE_URL=http://attacker.example/v1
RAG_LLM_MODEL=exfil
RAG_DATABASE_URL=postgresql+psycopg://x:y@attacker.example/rag
RAG_CHUNK_SIZE=640
RAG_API_THREADS=3
"""
NAMES = ("RAG_API_TOKEN", "RAG_API_CORS_ORIGINS", "RAG_LLM_BASE_URL", "RAG_LLM_MODEL", "RAG_DATABASE_URL")


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory: a git checkout holding a .env (not yet committed), and none of its variables set."""
    for name in (*NAMES, "RAG_CHUNK_SIZE", "RAG_API_THREADS", "RAG_LLM_API_KEY", "RAG_LLM_RERANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(envfile, "_WARNED", set())
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".env").write_text(DOTENV)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _commit(folder: Path) -> None:
    git = ["git", "-C", str(folder), "-c", "user.name=a", "-c", "user.email=a@b.c"]
    subprocess.run([*git, "add", ".env"], check=True)
    subprocess.run([*git, "commit", "-qm", "settings"], check=True)


def test_a_committed_env_sets_no_token_cors_llm_or_database(checkout: Path, caplog: pytest.LogCaptureFixture) -> None:
    _commit(checkout)
    with caplog.at_level(logging.WARNING, logger="rag_service.envfile"):
        settings = load_settings()
        server = load_server_config()
        load_settings()
    assert settings.llm_base_url is None and settings.llm_model is None and settings.database_url is None
    assert server.write_token is None and server.cors_origins == []
    assert settings.chunk_size == 640 and server.threads == 3  # the rest of it still applies
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [  # once, though two readers read it
        "ignored RAG_API_CORS_ORIGINS, RAG_API_TOKEN, RAG_DATABASE_URL, RAG_LLM_BASE_URL, RAG_LLM_MODEL from "
        f"{(checkout / '.env').resolve()}: git tracks that file (someone committed it), and settings that grant "
        "access or send data elsewhere come only from the environment or an untracked .env; export them to use them"
    ]


def test_the_environment_still_wins_and_is_not_named(checkout: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    _commit(checkout)
    monkeypatch.setenv("RAG_API_TOKEN", "my-own-token")
    with caplog.at_level(logging.WARNING, logger="rag_service.envfile"):
        assert load_server_config().write_token == "my-own-token"
    assert "ignored RAG_API_CORS_ORIGINS, RAG_DATABASE_URL," in caplog.text and "RAG_API_TOKEN" not in caplog.text


def test_an_untracked_env_is_ones_own_and_sets_everything(checkout: Path, caplog: pytest.LogCaptureFixture) -> None:
    (checkout / ".gitignore").write_text(".env\n")
    with caplog.at_level(logging.WARNING, logger="rag_service.envfile"):
        settings, server = load_settings(), load_server_config()
    assert settings.llm_base_url == "http://attacker.example/v1" and settings.database_url is not None
    assert server.write_token == "attackers-known-token" and server.cors_origins == ["https://attacker.example"]
    assert caplog.text == ""


def test_outside_a_checkout_the_env_is_ones_own_and_in_one_git_cannot_read_it_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / ".env").touch()
    assert envfile.committed(plain / ".env") is None
    broken = tmp_path / "broken"
    (broken / ".git").mkdir(parents=True)  # no repository git can read (or git is missing, or not ours)
    (broken / ".env").touch()
    why = envfile.committed(broken / ".env")
    assert why is not None and why.startswith("it lies in a git checkout and git could not say whether it is")
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert envfile.committed(broken / ".env") == (
        "it lies in a git checkout and git could not say whether it is committed (git is not installed)"
    )


def test_asking_git_runs_nothing_the_repository_configures(checkout: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``git ls-files`` ran the distrusted repository's ``core.fsmonitor`` command (code execution by ``rag query``
    in a folder that came with its ``.git``)."""
    marker = checkout / "ran"
    _commit(checkout)
    subprocess.run(["git", "-C", str(checkout), "config", "core.fsmonitor", f"touch {marker}; false"], check=True)
    assert envfile.committed(checkout / ".env") == "git tracks that file (someone committed it)"
    assert not marker.exists()
