"""BM25 statistics: postings, document frequencies and collection sizes, kept by triggers.

Every insert, update or delete of ``document_chunks`` (including cascades from ``documents``)
updates ``chunk_terms`` (one row per chunk and lexeme, with its term frequency and the chunk's
length), ``lexeme_stats`` (document frequency per collection and lexeme) and ``collection_stats``
(chunk count and total length) in the same statement, so the statistics are exactly right in every
committed state and a crash can leave none half-applied. Lexemes, term frequencies and lengths come
from the stored tsvector itself: ``tf`` is the number of positions of a lexeme (at least 1).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LEXEME_COUNT = """
CREATE FUNCTION rag_chunk_lexeme_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.lexeme_count := (
        SELECT coalesce(sum(greatest(coalesce(cardinality(u.positions), 0), 1)), 0)
        FROM unnest(NEW.content_tsv) AS u
    );
    RETURN NEW;
END $$
"""

_STATS = """
CREATE FUNCTION rag_chunk_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        DELETE FROM chunk_terms t USING old_rows o WHERE t.chunk_id = o.id;
        UPDATE lexeme_stats s SET doc_freq = s.doc_freq - d.n
        FROM (SELECT o.collection, u.lexeme, count(*) AS n
              FROM old_rows o, unnest(o.content_tsv) AS u GROUP BY 1, 2) d
        WHERE s.collection = d.collection AND s.lexeme = d.lexeme;
        DELETE FROM lexeme_stats WHERE doc_freq <= 0;
        UPDATE collection_stats s SET chunk_count = s.chunk_count - d.n, total_length = s.total_length - d.len
        FROM (SELECT collection, count(*) AS n, sum(lexeme_count) AS len FROM old_rows GROUP BY 1) d
        WHERE s.collection = d.collection;
        DELETE FROM collection_stats WHERE chunk_count <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO chunk_terms (chunk_id, collection, lexeme, tf, doc_len)
        SELECT n.id, n.collection, u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1), n.lexeme_count
        FROM new_rows n, unnest(n.content_tsv) AS u;
        INSERT INTO lexeme_stats AS s (collection, lexeme, doc_freq)
        SELECT n.collection, u.lexeme, count(*) FROM new_rows n, unnest(n.content_tsv) AS u GROUP BY 1, 2
        ON CONFLICT (collection, lexeme) DO UPDATE SET doc_freq = s.doc_freq + EXCLUDED.doc_freq;
        INSERT INTO collection_stats AS s (collection, chunk_count, total_length)
        SELECT collection, count(*), sum(lexeme_count) FROM new_rows GROUP BY 1
        ON CONFLICT (collection) DO UPDATE SET chunk_count = s.chunk_count + EXCLUDED.chunk_count,
                                               total_length = s.total_length + EXCLUDED.total_length;
    END IF;
    RETURN NULL;
END $$
"""

_STATS_TRIGGERS = (
    "CREATE TRIGGER document_chunks_stats_insert AFTER INSERT ON document_chunks "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_chunk_stats()",
    "CREATE TRIGGER document_chunks_stats_delete AFTER DELETE ON document_chunks "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_chunk_stats()",
    "CREATE TRIGGER document_chunks_stats_update AFTER UPDATE ON document_chunks "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rag_chunk_stats()",
)
_DROP_STATS_TRIGGERS = (
    "DROP TRIGGER IF EXISTS document_chunks_stats_insert ON document_chunks",
    "DROP TRIGGER IF EXISTS document_chunks_stats_delete ON document_chunks",
    "DROP TRIGGER IF EXISTS document_chunks_stats_update ON document_chunks",
)


def upgrade() -> None:
    op.add_column("document_chunks", sa.Column("lexeme_count", sa.Integer(), server_default="0", nullable=False))
    op.create_table(
        "chunk_terms",
        sa.Column("chunk_id", sa.BigInteger(), nullable=False),
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.Column("doc_len", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("chunk_id", "lexeme", name="pk_chunk_terms"),
    )
    op.create_index(
        "ix_chunk_terms_postings",
        "chunk_terms",
        ["collection", "lexeme"],
        postgresql_include=["chunk_id", "tf", "doc_len"],
    )
    op.create_table(
        "lexeme_stats",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("doc_freq", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("collection", "lexeme", name="pk_lexeme_stats"),
    )
    op.create_table(
        "collection_stats",
        sa.Column("collection", sa.String(200), primary_key=True),
        sa.Column("chunk_count", sa.BigInteger(), nullable=False),
        sa.Column("total_length", sa.BigInteger(), nullable=False),
    )
    op.add_column(
        "rag_configurations",
        sa.Column("keyword_scorer", sa.String(16), server_default="bm25", nullable=False),
    )
    op.create_check_constraint(
        "ck_rag_configurations_keyword_scorer", "rag_configurations", "keyword_scorer IN ('bm25', 'ts_rank_cd')"
    )
    _backfill()
    op.execute(_LEXEME_COUNT)
    op.execute(_STATS)
    op.execute(
        "CREATE TRIGGER document_chunks_lexeme_count BEFORE INSERT OR UPDATE OF content_tsv ON document_chunks "
        "FOR EACH ROW EXECUTE FUNCTION rag_chunk_lexeme_count()"
    )
    for statement in _STATS_TRIGGERS:
        op.execute(statement)


def _backfill() -> None:
    """Statistics of the chunks already stored (before the triggers exist, so nothing counts twice).

    Only ``lexeme_count`` changes in ``document_chunks``: no indexed column, so the HNSW and GIN
    indexes are not rewritten.
    """
    op.execute(
        "UPDATE document_chunks SET lexeme_count = (SELECT coalesce(sum(greatest(coalesce(cardinality(u.positions), "
        "0), 1)), 0) FROM unnest(content_tsv) AS u)"
    )
    op.execute(
        "INSERT INTO chunk_terms (chunk_id, collection, lexeme, tf, doc_len) "
        "SELECT c.id, c.collection, u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1), c.lexeme_count "
        "FROM document_chunks c, unnest(c.content_tsv) AS u"
    )
    op.execute(
        "INSERT INTO lexeme_stats (collection, lexeme, doc_freq) "
        "SELECT collection, lexeme, count(*) FROM chunk_terms GROUP BY 1, 2"
    )
    op.execute(
        "INSERT INTO collection_stats (collection, chunk_count, total_length) "
        "SELECT collection, count(*), sum(lexeme_count) FROM document_chunks GROUP BY 1"
    )


def downgrade() -> None:
    for statement in _DROP_STATS_TRIGGERS:
        op.execute(statement)
    op.execute("DROP TRIGGER IF EXISTS document_chunks_lexeme_count ON document_chunks")
    op.execute("DROP FUNCTION IF EXISTS rag_chunk_stats()")
    op.execute("DROP FUNCTION IF EXISTS rag_chunk_lexeme_count()")
    op.drop_constraint("ck_rag_configurations_keyword_scorer", "rag_configurations")
    op.drop_column("rag_configurations", "keyword_scorer")
    op.drop_table("collection_stats")
    op.drop_table("lexeme_stats")
    op.drop_index("ix_chunk_terms_postings", table_name="chunk_terms")
    op.drop_table("chunk_terms")
    op.drop_column("document_chunks", "lexeme_count")
