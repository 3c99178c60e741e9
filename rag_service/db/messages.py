"""How a database shows up in a user-facing line: its URL without the password, a driver error's first line."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from rag_service.log import mask_url


def url_for_display(engine: Engine) -> str:
    """The engine's URL with its password masked."""
    return mask_url(engine.url.render_as_string(hide_password=True))


def first_line(exc: DBAPIError) -> str:
    """The first line of the server's message (the driver error's, without SQLAlchemy's statement dump)."""
    text = str(exc.orig) if exc.orig is not None else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
