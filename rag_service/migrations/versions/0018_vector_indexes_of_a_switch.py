"""Switching to a model of another dimension: ``index_settings.vector_indexes``.

``rag reindex --all`` with a model of another dimension makes the vector columns dimensionless for the switch
(a document that fails keeps its old vectors beside the re-embedded ones) and drops the vector indexes, which
need a dimension; their definitions are kept here and rebuilt when the switch ends (``db.vector_columns``).
NULL: no switch of dimension is under way.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("index_settings", sa.Column("vector_indexes", ARRAY(sa.Text()), nullable=True))


def downgrade() -> None:
    kept = op.get_bind().execute(sa.text("SELECT 1 FROM index_settings WHERE vector_indexes IS NOT NULL")).first()
    if kept is not None:  # the older schema would lose the dropped indexes' definitions
        raise RuntimeError(
            "a switch of the embedding model to another dimension is unfinished; finish it with "
            "`rag reindex --all` before downgrading below 0018"
        )
    op.drop_column("index_settings", "vector_indexes")
