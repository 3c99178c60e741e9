"""``RAG_LLM_*`` settings no call could use are refused at start, in one line naming the setting and the fix
(never showing a credential); the rest reach the client, whose every failure is an ``LLMError``."""

from __future__ import annotations

import pytest

from rag_service.config import load_settings
from rag_service.errors import ConfigurationError

URL = "http://127.0.0.1:9/v1"


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


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8000/v1", "localhost:8000/v1", "ftp://127.0.0.1/v1", "not a url", "http:///v1", "file:///v1"]
)
def test_a_url_without_http_or_a_host_is_refused(clean_env, url):
    message = refused(clean_env, RAG_LLM_BASE_URL=url, RAG_LLM_MODEL="m")
    assert message == (
        f"RAG_LLM_BASE_URL ({url!r}) must start with http:// or https:// and name a host, e.g. http://localhost:8000/v1"
    )


@pytest.mark.parametrize("url", ["ftp://user:s3cret@host/v1", "user:s3cret@host:1/v1"])
def test_a_refused_url_never_shows_its_password(clean_env, url):
    assert "s3cret" not in refused(clean_env, RAG_LLM_BASE_URL=url, RAG_LLM_MODEL="m")


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"RAG_LLM_MODEL": "m"}, "RAG_LLM_MODEL is set but RAG_LLM_BASE_URL is not; set it"),
        ({"RAG_LLM_RERANK": "true"}, "RAG_LLM_RERANK is set but RAG_LLM_BASE_URL is not; set it"),
        ({"RAG_LLM_MODEL": "m", "RAG_LLM_API_KEY": "sk-s3cret"}, "RAG_LLM_MODEL and RAG_LLM_API_KEY are set but"),
        ({"RAG_LLM_MODEL": "m", "RAG_LLM_BASE_URL": ""}, "RAG_LLM_MODEL is set but RAG_LLM_BASE_URL is not"),
    ],
)
def test_what_asks_for_an_llm_without_its_url_is_refused(clean_env, variables, named):
    message = refused(clean_env, **variables)
    assert message.startswith(named) and "(e.g. http://localhost:8000/v1), or unset" in message
    assert "s3cret" not in message


def test_tuning_without_an_llm_is_not_refused(clean_env):
    """They change nothing by themselves, and turning summaries off needs no endpoint."""
    for name, value in [("RAG_LLM_SUMMARIES", "false"), ("RAG_LLM_TIMEOUT_S", "5"), ("RAG_LLM_RERANK_TOP", "3")]:
        clean_env.setenv(name, value)
    assert load_settings().llm_base_url is None


@pytest.mark.parametrize("url", ["http://user:s3cret@127.0.0.1:9/v1", "http://tok3n@127.0.0.1:9/v1"])
def test_a_url_with_a_password_and_a_key_is_refused(clean_env, url):
    """httpx made a Basic header of the URL's userinfo and sent it instead of the key's Bearer one, so the endpoint
    saw the wrong credential; one of them has to go."""
    message = refused(clean_env, RAG_LLM_BASE_URL=url, RAG_LLM_MODEL="m", RAG_LLM_API_KEY="sk-k3y")
    assert message.startswith("RAG_LLM_BASE_URL ('http://***@127.0.0.1:9/v1') holds a user name or password")
    assert "keep one" in message and "s3cret" not in message and "tok3n" not in message and "k3y" not in message
    clean_env.delenv("RAG_LLM_API_KEY")
    assert load_settings().llm_base_url == url  # either alone is fine
