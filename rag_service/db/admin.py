"""Server-level helpers: psycopg connection keywords from a URL, and databases by name."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import make_url


def admin_params(url: str, *, database: str | None = None) -> dict[str, Any]:
    """psycopg connection keywords for a SQLAlchemy URL (unix-socket URLs of the embedded server too)."""
    parsed = make_url(url)
    params: dict[str, Any] = {"dbname": database or parsed.database or "postgres", "autocommit": True}
    for key in ("host", "port"):
        if key in parsed.query:
            params[key] = parsed.query[key]
    if parsed.host:
        params["host"] = parsed.host
    if parsed.port:
        params["port"] = parsed.port
    if parsed.username:
        params["user"] = parsed.username
    if parsed.password:
        params["password"] = parsed.password
    return params


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url``."""
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)
