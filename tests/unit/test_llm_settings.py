"""``RAG_LLM_*`` settings no call could use are refused at start, in one line naming the setting and the fix
(never showing a credential); the rest reach the client, whose every failure is an ``LLMError``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_service.config import load_settings
from rag_service.errors import ConfigurationError

URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in [n for n in os.environ if n.upper().startswith("RAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no stray .env
    return monkeypatch


def refused(env: pytest.MonkeyPatch, **variables: str) -> str:
    """The one-line ConfigurationError ``load_settings`` raises with ``variables`` set."""
    for name, value in variables.items():
        env.setenv(name, value)
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
def test_a_timeout_of_nan_is_refused(clean_env, value):
    message = refused(clean_env, RAG_LLM_BASE_URL=URL, RAG_LLM_MODEL="m", RAG_LLM_TIMEOUT_S=value)
    assert message == "RAG_LLM_TIMEOUT_S (nan) must be a finite number"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::1/v1", "Invalid IPv6 URL"),
        ("http://127.0.0.1:99999/v1", "Port out of range"),
        ("http://user:pw@127.0.0.1:x/v1", "Port could not be cast"),
    ],
)
def test_a_url_that_does_not_parse_is_refused(clean_env, url, reason):
    message = refused(clean_env, RAG_LLM_BASE_URL=url, RAG_LLM_MODEL="m")
    assert message.startswith("RAG_LLM_BASE_URL (") and reason in message and "e.g. http://localhost:8000/v1" in message
    assert ":pw@" not in message


@pytest.mark.parametrize("key", ["sk-clé-s3cret", "sk-s3cret\nX-Injected: 1", "sk s3cret"])
def test_a_key_a_header_cannot_carry_is_refused_without_showing_it(clean_env, key):
    message = refused(clean_env, RAG_LLM_BASE_URL=URL, RAG_LLM_MODEL="m", RAG_LLM_API_KEY=key)
    assert message.startswith("RAG_LLM_API_KEY holds a space, a control or a non-ASCII character")
    assert "s3cret" not in message


def test_the_whitespace_around_a_key_is_dropped(clean_env):
    clean_env.setenv("RAG_LLM_BASE_URL", URL)
    clean_env.setenv("RAG_LLM_MODEL", "m")
    clean_env.setenv("RAG_LLM_API_KEY", " sk-s3cret\n")  # read from a file
    key = load_settings().llm_api_key
    assert key is not None and key.get_secret_value() == "sk-s3cret"
