"""A relevance floor per preset: ``rag_configurations.min_relevance``.

Results whose calibrated relevance (``rag_service/retrieve/relevance.py``) is below the preset's
``min_relevance`` are dropped, and a query with none left says so. 0 keeps every result (as before);
the stock ``agent`` and ``chatbot`` presets get the floors chosen in docs/benchmarks.md.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the floors of the stock presets (``config.AGENT_MIN_RELEVANCE`` and ``CHATBOT_MIN_RELEVANCE``; docs/benchmarks.md,
#: "issue 25.3"), written here as values: a migration must not change when the code's defaults do
STOCK_FLOORS = {"agent": 0.3, "chatbot": 0.2}


def upgrade() -> None:
    op.add_column("rag_configurations", sa.Column("min_relevance", sa.Float(), server_default="0", nullable=False))
    op.create_check_constraint(
        "ck_rag_configurations_min_relevance", "rag_configurations", "min_relevance >= 0 AND min_relevance <= 1"
    )
    for context_type, floor in STOCK_FLOORS.items():
        op.execute(
            sa.text(
                "UPDATE rag_configurations SET min_relevance = :floor, updated_at = now() WHERE context_type = :context"
            ).bindparams(floor=floor, context=context_type)
        )


def downgrade() -> None:
    op.drop_constraint("ck_rag_configurations_min_relevance", "rag_configurations")
    op.drop_column("rag_configurations", "min_relevance")
