"""Vectors a switch of the embedding model has embedded: ``model_switch_vectors``.

``rag reindex --all`` writes each collection's new vectors in one transaction, so a run stopped midway used to
lose every vector it had embedded, and the next run embedded them all again (hours at a million chunks). Each
vector a switch embeds is also kept here, committed as it is made, by the model and the hash of the text it
embeds; the next run of the same switch reuses them, and the switch's end empties the table (``db.switch_vectors``).
The column is dimensionless: a switch may be to a model of another dimension.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_switch_vectors",
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.PrimaryKeyConstraint("model", "content_hash", name="pk_model_switch_vectors"),
    )


def downgrade() -> None:
    op.drop_table("model_switch_vectors")
