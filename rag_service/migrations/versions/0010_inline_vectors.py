"""Chunk vectors stored in the row: ``document_chunks.embedding`` gets storage MAIN.

pgvector's type defaults to EXTERNAL storage, so a chunk row over ~2 kB (384 floats are 1.5 kB, plus
its text and tsvector) had its vector moved to the TOAST table, and every read of a vector was a
second index lookup: an exact search (collections of up to ``RAG_EXACT_SEARCH_BELOW`` chunks) over
21k chunks took 63 ms against 11 ms with the vectors in the row (docs/benchmarks.md). With MAIN the
text and tsvector are compressed or moved out first, and a vector leaves the row only when nothing
else can. Rows written before this keep their layout until they are written again (``rag reindex``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE document_chunks ALTER COLUMN embedding SET STORAGE MAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE document_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL")
