"""Switching the embedding model: ``index_settings.switching_to``.

``rag reindex --all`` with a model of the same dimension re-embeds every collection with it. The
model being switched to is recorded here before the first re-embedded vector is written; while it is
set the database holds vectors of two models, so reads and ordinary writes refuse. The run that has
re-embedded every document stores it as ``embedding_model`` and clears this column in one
transaction. NULL: no switch is under way. ``index_settings`` is a plain table on a Citus coordinator
(never distributed), so the column is added there as on one node.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("index_settings", sa.Column("switching_to", sa.Text(), nullable=True))


def downgrade() -> None:
    unfinished = op.get_bind().execute(
        sa.text("SELECT embedding_model, switching_to FROM index_settings WHERE switching_to IS NOT NULL")
    )
    row = unfinished.first()
    if row is not None:  # the older schema could not tell that the vectors are of two models
        raise RuntimeError(
            f"a switch of the embedding model from {row[0]!r} to {row[1]!r} is unfinished; finish it with "
            "`rag reindex --all` before downgrading below 0008"
        )
    op.drop_column("index_settings", "switching_to")
