"""Postings ordered by impact, so the BM25 arm can read the best postings of a lexeme first.

``ix_chunk_terms_impact`` replaces ``ix_chunk_terms_postings``: the same leading keys (collection,
lexeme) and covered columns serve the exact BM25 arm, and the third key ``len / tf`` orders a
lexeme's postings from the highest BM25 score to the lowest for any k1 and b, which the bounded arm
(``RAG_BM25_MAX_POSTINGS``) reads with a LIMIT.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_chunk_terms_impact ON chunk_terms "
        "(collection, lexeme, (CAST(doc_len AS DOUBLE PRECISION) / CAST(tf AS DOUBLE PRECISION))) "
        "INCLUDE (chunk_id, tf, doc_len)"
    )
    op.drop_index("ix_chunk_terms_postings", table_name="chunk_terms")


def downgrade() -> None:
    op.create_index(
        "ix_chunk_terms_postings",
        "chunk_terms",
        ["collection", "lexeme"],
        postgresql_include=["chunk_id", "tf", "doc_len"],
    )
    op.drop_index("ix_chunk_terms_impact", table_name="chunk_terms")
