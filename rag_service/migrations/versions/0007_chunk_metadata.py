"""Chunk and document metadata in the context: ``rag_configurations.show_metadata``.

Keywords (``document_chunks.metadata.keywords``) and summaries (``documents.metadata.summary``) live
in the existing jsonb columns, so the only schema change is the preset switch that makes the
formatter show them; off in every stock preset.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "rag_configurations",
        sa.Column("show_metadata", sa.Boolean(), server_default="false", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("rag_configurations", "show_metadata")
