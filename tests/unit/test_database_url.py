"""``RAG_DATABASE_URL`` mistakes end in one line naming the URL and the fix: a driver other than psycopg 3 (a
traceback from SQLAlchemy before), a typo of the scheme, no scheme (the form shows where the password goes)."""

from __future__ import annotations

import pytest

from rag_service.config import Settings
from rag_service.db.engine import resolve_database_url
from rag_service.db.replicas import parse_read_urls
from rag_service.errors import ConfigurationError
from rag_service.log import URL_TEMPLATE, mask_url


def _error(url: str) -> str:
    with pytest.raises(ConfigurationError) as caught:
        resolve_database_url(Settings(database_url=url))
    message = mask_url(str(caught.value))  # as the CLI prints it
    assert "\n" not in message and "secret" not in message
    return message


@pytest.mark.parametrize("driver", ["pyscopg", "psycopg2", "asyncpg"])
def test_a_driver_other_than_psycopg_is_named_with_the_fix(driver: str) -> None:
    message = _error(f"postgresql+{driver}://rag:secret@127.0.0.1:5432/rag")
    assert message.startswith(f"RAG_DATABASE_URL (postgresql+{driver}://rag:***@127.0.0.1:5432/rag)")
    assert f"uses the driver {driver!r}" in message and "postgresql+psycopg://" in message


def test_a_typo_of_the_scheme_gets_a_did_you_mean() -> None:
    message = _error("postgresq://rag:secret@h/rag")
    assert "did you mean postgresql://?" in message and "is not PostgreSQL" not in message
    assert "is not PostgreSQL" in _error("mysql://rag:secret@h/rag")


def test_the_form_to_use_shows_where_the_password_goes() -> None:
    message = _error("127.0.0.1:5432/rag")
    assert message.endswith(f"use {URL_TEMPLATE}") and "USER:PASSWORD@HOST" in message
    assert mask_url("postgresql+psycopg://USER:hunter2@h/d") == "postgresql+psycopg://USER:***@h/d"


def test_psycopg_and_plain_postgresql_pass() -> None:
    for url in ("postgresql://u:p@h/d", "postgres://u@h/d", "postgresql+psycopg://u@h/d"):
        assert resolve_database_url(Settings(database_url=url)).startswith("postgresql+psycopg://")
    with pytest.raises(ConfigurationError, match=r"RAG_READ_DATABASE_URL: .* uses the driver 'psycopg2'"):
        parse_read_urls("postgresql+psycopg2://u@h/d")
