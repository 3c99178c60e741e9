"""What the HTTP API edits: one document by source, preset rows (collections: ``db.collections``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy import String, delete, func, literal, select, update
from sqlalchemy.orm import Session

from rag_service.config import Preset
from rag_service.db import graph
from rag_service.db.models import Document, RagConfiguration
from rag_service.db.presets import load_preset, stored_message, stored_problems
from rag_service.db.source_match import key_spellings
from rag_service.errors import ConfigurationError
from rag_service.knobs import check_knobs


def delete_by_source(session: Session, *, collection: str, source: str) -> int:
    """Delete the document ``source`` of ``collection`` (its chunks cascade, its edges first); returns 0 or 1.

    The exact key first; else the key in its other Unicode form (``key_spellings``: a name typed in NFC for a key
    a Mac stored in NFD), so one of two documents stored under both forms is not deleted for the other."""
    for spellings in ([source], key_spellings(source)[1:]):
        if not spellings:
            break
        where = (Document.collection == collection, Document.source.in_(spellings))
        ids = session.scalars(select(Document.id).where(*where)).all()
        if ids:
            graph.forget_documents(session, collection=collection, document_ids=ids)
            result = session.execute(delete(Document).where(*where))
            return int(result.rowcount or 0)  # type: ignore[attr-defined]
    return 0


def sources_ending_with(session: Session, *, collection: str, path: str, limit: int = 3) -> list[str]:
    """Stored sources of ``collection`` that end with ``/path`` (a delete given ``corpA/errors.md`` where the
    document is stored under its absolute path), else those ``path`` ends with after a ``/`` (a delete given the
    file's on-disk path where the key is relative to its checkout), at most ``limit``."""
    tail = "/" + path.lstrip("/")
    found = list(
        session.scalars(
            select(Document.source)
            .where(Document.collection == collection, Document.source.endswith(tail, autoescape=True))
            .order_by(Document.source)
            .limit(limit)
        )
    )
    if found:
        return found
    # the other way round: an on-disk path given for a key stored relative to its checkout (docs/x.md)
    given = literal(path, String)
    return list(
        session.scalars(
            select(Document.source)
            .where(
                Document.collection == collection,
                func.right(given, func.length(Document.source) + 1) == literal("/", String) + Document.source,
            )
            .order_by(func.length(Document.source).desc(), Document.source)
            .limit(limit)
        )
    )


def update_preset(session: Session, context_type: str, values: dict[str, Any]) -> Preset:
    """Change some columns of a preset row, validated like a per-call override; returns the new preset.

    UnknownContextError for a missing row, ConfigurationError for an unknown column or a bad value, or
    for a bad stored value (a row edited in SQL) that ``values`` leave as it is.
    """
    # the row locked as it is read: two edits of one preset at once each wrote back the knobs it read, so the
    # later one undid the earlier's change (both told it was stored)
    stored = load_preset(session, context_type, for_update=True)
    try:
        updated = stored.with_overrides(values)
    except ConfigurationError:
        check_knobs(values)  # a bad value sent is named first
        wrong = stored_problems(stored, replaced=values)
        if wrong:  # the change leaves a bad value a SQL edit stored
            fix = f"send valid {', '.join(wrong)} in this change too"
            raise ConfigurationError(f"{stored_message(stored, wrong)}; {fix}") from None
        raise
    row = {k: v for k, v in asdict(updated).items() if k != "context_type"}
    session.execute(
        update(RagConfiguration)
        .where(RagConfiguration.context_type == context_type)
        .values(**row, updated_at=func.now())
    )
    return updated
