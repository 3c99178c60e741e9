"""Reading the context presets from ``rag_configurations`` (at call time, so edits apply at once)."""

from __future__ import annotations

from typing import cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from rag_service.config import FusionMethod, KeywordScorer, Preset
from rag_service.db.models import RagConfiguration
from rag_service.errors import UnknownContextError


def _to_preset(row: RagConfiguration) -> Preset:
    return Preset(
        context_type=row.context_type,
        expand_query=row.expand_query,
        return_parents=row.return_parents,
        diversity=row.diversity,
        max_chunks=row.max_chunks,
        max_tokens=row.max_tokens,
        vector_weight=row.vector_weight,
        keyword_weight=row.keyword_weight,
        rerank_enabled=row.rerank_enabled,
        rrf_k=row.rrf_k,
        fusion_method=cast(FusionMethod, row.fusion_method),
        candidate_k=row.candidate_k,
        keyword_scorer=cast(KeywordScorer, row.keyword_scorer),
    )


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
