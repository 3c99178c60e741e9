"""Packed postings: the exact BM25 arm of large collections (``db.packed_postings``, ``ext/rag_bm25``).

``bm25_packed_snapshots`` says which chunks a collection's ``bm25_packed_lists`` hold (one bytea of postings a
lexeme, written by the extension's aggregate); ``bm25_packed_tombstones`` records the chunks deleted or rewritten
since (``rewritten``: still there, with other postings), by a row trigger on ``document_chunks`` that writes only for
a collection with a snapshot. The tables fill
when an ingest finds a collection large enough and the extension installed; until then nothing changes. On
Citus the trigger is not created (``citus.use_row_level_stats`` drops it) and no snapshot is built.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from rag_service.db import citus

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TOMBSTONE_FUNCTION = """
CREATE OR REPLACE FUNCTION rag_packed_tombstone_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bm25_packed_tombstones (collection, chunk_id, rewritten)
    SELECT OLD.collection, OLD.id, TG_OP = 'UPDATE'
    WHERE EXISTS (SELECT 1 FROM bm25_packed_snapshots WHERE collection = OLD.collection)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$
"""
_TRIGGERS = (
    "CREATE TRIGGER document_chunks_packed_delete AFTER DELETE ON document_chunks "
    "FOR EACH ROW EXECUTE FUNCTION rag_packed_tombstone_row()",
    "CREATE TRIGGER document_chunks_packed_update AFTER UPDATE OF content_tsv ON document_chunks "
    "FOR EACH ROW EXECUTE FUNCTION rag_packed_tombstone_row()",
)


def upgrade() -> None:
    op.create_table(
        "bm25_packed_snapshots",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("base_id", sa.BigInteger(), nullable=False),
        sa.Column("max_id", sa.BigInteger(), nullable=False),
        sa.Column("chunk_count", sa.BigInteger(), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("built_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("collection"),
    )
    op.create_table(
        "bm25_packed_lists",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("collection", "lexeme", name="pk_bm25_packed_lists"),
    )
    # read whole and already dense: out of line, uncompressed (pglz would cost each read a decompression)
    op.execute("ALTER TABLE bm25_packed_lists ALTER COLUMN data SET STORAGE EXTERNAL")
    op.create_table(
        "bm25_packed_tombstones",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("chunk_id", sa.BigInteger(), nullable=False),
        sa.Column("rewritten", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("collection", "chunk_id", name="pk_bm25_packed_tombstones"),
    )
    bind = op.get_bind()
    bind.execute(sa.text(_TOMBSTONE_FUNCTION))
    if citus.distributed_tables(bind):
        return  # a trigger on a shard may not write a local table: no snapshots on Citus
    for trigger in _TRIGGERS:
        bind.execute(sa.text(trigger))


def downgrade() -> None:
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")  # a placeholder setting without Citus
    op.execute("DROP TRIGGER IF EXISTS document_chunks_packed_delete ON document_chunks")
    op.execute("DROP TRIGGER IF EXISTS document_chunks_packed_update ON document_chunks")
    op.execute("DROP FUNCTION rag_packed_tombstone_row()")
    op.drop_table("bm25_packed_tombstones")
    op.drop_table("bm25_packed_lists")
    op.drop_table("bm25_packed_snapshots")
