"""How a database shows up in a user-facing line: its URL without the password (a driver error's first
line: ``rag_service.errors.first_line``)."""

from __future__ import annotations

from sqlalchemy import Engine

from rag_service.log import mask_url


def url_for_display(engine: Engine) -> str:
    """The engine's URL with its password masked."""
    return mask_url(engine.url.render_as_string(hide_password=True))
