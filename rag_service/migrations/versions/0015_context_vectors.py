"""Each context's mean vector, for the context similarity (``db.context_vector``).

``document_contexts.embedding`` is the mean of the stored vectors of the context's chunks, written with the
context's row (``db.contexts``), so a search reads it with one probe per returned row instead of averaging the
chunks' vectors per row. Existing contexts get it here, one collection at a time (a single-shard statement on
Citus): one read of the collection's vectors.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

from rag_service.config import SCHEMA_EMBEDDING_DIM
from rag_service.db.contexts import CONTEXT_MEAN_VECTOR

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_log = logging.getLogger("alembic.runtime.migration")
_BACKFILL = (  # constants only; the collection is a bound parameter
    "UPDATE document_contexts v SET embedding = "  # noqa: S608
    + CONTEXT_MEAN_VECTOR.format(collection="v.collection")
    + " WHERE v.collection = :collection"
)


def upgrade() -> None:
    op.add_column("document_contexts", sa.Column("embedding", Vector(SCHEMA_EMBEDDING_DIM), nullable=True))
    bind = op.get_bind()
    collections = bind.execute(sa.text("SELECT DISTINCT collection FROM document_contexts")).scalars().all()
    for collection in collections:
        bind.execute(sa.text(_BACKFILL), {"collection": collection})
        _log.info("mean context vectors of %s written", collection)


def downgrade() -> None:
    op.drop_column("document_contexts", "embedding")
