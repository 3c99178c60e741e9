"""The stock floors for ``min_relevance`` read as a gate on the first result (session 10).

``min_relevance`` now gates a query on its first result (below it, nothing is returned) and cuts the
results after it at half of it (``retrieve/relevance.py``, ``TAIL_SHARE``). With int8 vectors (the
default backend) the old single floors missed issue 25.3's targets (agent 0.3: ray-docs-qa -0.0121
nDCG@10, out-of-domain ratio 0.217); under the new rule 0.43 meets both for ``agent`` (docs/benchmarks.md,
"Issue 25 point 3 on int8, session 10"). ``chatbot`` keeps 0.2, now as a gate: at 0.43 short keyword
questions with a clear answer were refused. Only presets still at 0009's values change; edited rows are
left alone.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

from rag_service.db.presets import move_stock_floors

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (0009's floor, this one's) per stock preset, written here as values: a migration must not change
#: when the code's defaults (``config.AGENT_MIN_RELEVANCE``, ``CHATBOT_MIN_RELEVANCE``) do
STOCK_FLOORS = {"agent": (0.3, 0.43)}


def upgrade() -> None:
    move_stock_floors(op.get_bind(), STOCK_FLOORS)


def downgrade() -> None:
    move_stock_floors(op.get_bind(), STOCK_FLOORS, back=True)
