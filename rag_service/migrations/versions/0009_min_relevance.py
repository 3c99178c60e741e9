"""A relevance floor per preset: ``rag_configurations.min_relevance``.

Results whose calibrated relevance (``rag_service/retrieve/relevance.py``) is below the preset's
``min_relevance`` are dropped, and a query with none left says so. 0 keeps every result (as before);
the stock ``agent`` and ``chatbot`` presets get the floor chosen in docs/benchmarks.md, if they still
hold their seeded values of that knob (0).

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the floor of the stock agent and chatbot presets (docs/benchmarks.md, "issue 25.3")
STOCK_MIN_RELEVANCE = 0.3


def upgrade() -> None:
    op.add_column("rag_configurations", sa.Column("min_relevance", sa.Float(), server_default="0", nullable=False))
    op.create_check_constraint(
        "ck_rag_configurations_min_relevance", "rag_configurations", "min_relevance >= 0 AND min_relevance <= 1"
    )
    op.execute(
        sa.text(
            "UPDATE rag_configurations SET min_relevance = :floor, updated_at = now() "
            "WHERE context_type IN ('agent', 'chatbot')"
        ).bindparams(floor=STOCK_MIN_RELEVANCE)
    )


def downgrade() -> None:
    op.drop_constraint("ck_rag_configurations_min_relevance", "rag_configurations")
    op.drop_column("rag_configurations", "min_relevance")
