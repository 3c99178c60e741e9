"""Where a document's relative source key came from: ``documents.origin``.

A file's key is its path relative to the checkout holding it (or ``--root``), so two checkouts' ``docs/a.md``
share a key. The folder the key is relative to is kept beside it, so a run over one checkout neither
overwrites another's document of the same key nor prunes documents it never indexed (``ingest.origins``).
NULL: not known (written before this revision; an absolute key); '': a document given as text, not a file.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("origin", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("documents", "origin")
