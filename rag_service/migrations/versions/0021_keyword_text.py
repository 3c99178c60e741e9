"""``rag_keyword_text(text)``: the text the keyword arm reads (``rag_service.keyword_text``).

Every tsvector built from a document's text goes through it: Unicode folded (NFKC, no format characters), and
Chinese, Japanese, Thai and Korean runs cut into pairs of characters, so a word inside them can be found. Chunks
written before this revision keep their tsvectors (identical for ASCII text) until the next ``rag reindex`` of
their documents, which rewrites them (``db.documents.INDEX_FORMAT`` tsv3; their vectors are reused).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

from rag_service.keyword_text import create_keyword_text_function

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    create_keyword_text_function(op.get_bind())


def downgrade() -> None:
    op.execute("DROP FUNCTION rag_keyword_text(text)")
