"""``RAG_READ_DATABASE_URL``: comma-separated URLs, each checked (the connect timeout: ``test_connect_timeout``)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from rag_service.db.replicas import parse_read_urls
from rag_service.errors import ConfigurationError


def test_read_urls_are_parsed_and_checked():
    one = "postgresql://u:p,w@h1:5432/rag"
    socket = "postgresql+psycopg://postgres@/rag?host=/tmp/pg&port=5433&connect_timeout=7"
    urls = parse_read_urls(f"{one}, {socket}")
    first, second = (make_url(u) for u in urls)
    assert (first.drivername, first.password, first.host, first.query) == (
        "postgresql+psycopg",
        "p,w",
        "h1",
        {},
    )
    assert second.query == {"host": "/tmp/pg", "port": "5433", "connect_timeout": "7"}  # given: kept
    assert parse_read_urls("") == [] and parse_read_urls(None) == []
    with pytest.raises(ConfigurationError, match=r"RAG_READ_DATABASE_URL.*not PostgreSQL"):
        parse_read_urls("mysql://h/db")
    with pytest.raises(ConfigurationError, match=r"RAG_READ_DATABASE_URL.*not a database URL"):
        parse_read_urls("not a url")
    with pytest.raises(ConfigurationError, match=r"RAG_READ_DATABASE_URL.*not a database URL"):
        parse_read_urls("postgresql://u@h2:5432,h3:5432/rag")
