"""Settings for part of a transaction: set for the statements run inside, then put back as they were."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

# NULL for a setting not defined yet (an extension's before its library loads); set_config(name, NULL) resets it
_SHOW = text(
    "SELECT current_setting(s.name, true) FROM unnest(CAST(:names AS text[])) WITH ORDINALITY AS s(name, n) "
    "ORDER BY s.n"
)
_SET = text(
    "SELECT set_config(s.name, s.value, true) "
    "FROM unnest(CAST(:names AS text[]), CAST(:values AS text[])) AS s(name, value)"
)


@contextmanager
def local_settings(session: Session | Connection, settings: dict[str, str]) -> Iterator[None]:
    """These settings (name: value) for the statements run inside, each put back afterwards (one round trip to
    read them, one to set them, one to restore them). Transaction-local: after a failure inside, the
    transaction's rollback takes them with it."""
    if not settings:
        yield
        return
    names = list(settings)
    before = list(session.execute(_SHOW, {"names": names}).scalars())
    session.execute(_SET, {"names": names, "values": [settings[name] for name in names]})
    yield
    session.execute(_SET, {"names": names, "values": before})
