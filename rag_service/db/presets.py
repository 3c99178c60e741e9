"""Reading the presets from ``rag_configurations`` (at call time, so edits apply at once)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from rag_service.config import Preset
from rag_service.db.models import RagConfiguration
from rag_service.errors import UnknownContextError
from rag_service.records import from_fields


def _to_preset(row: RagConfiguration) -> Preset:
    return from_fields(Preset, row)


def list_presets(session: Session) -> list[Preset]:
    """Every preset, ordered by id."""
    rows = session.execute(select(RagConfiguration).order_by(RagConfiguration.id)).scalars()
    return [_to_preset(row) for row in rows]


def load_preset(session: Session, context_type: str) -> Preset:
    """The preset named ``context_type``; UnknownContextError lists the valid names."""
    row = session.execute(
        select(RagConfiguration).where(RagConfiguration.context_type == context_type)
    ).scalar_one_or_none()
    if row is None:
        names = session.execute(select(RagConfiguration.context_type).order_by(RagConfiguration.id)).scalars()
        raise UnknownContextError(f"unknown context {context_type!r}; valid contexts: {', '.join(names)}")
    return _to_preset(row)
