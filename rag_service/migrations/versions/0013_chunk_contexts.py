"""Each chunk's context (its section, or its document) with its own postings: the context BM25.

``document_contexts`` holds each context's length, ``context_terms`` its postings (``db.contexts``);
``context_stats`` holds each collection's context count and total length, kept by a row trigger (row-level so that
Citus can run it, as ``rag_chunk_stats_row``). On a database already distributed by Citus the new
tables are distributed here, before they are filled (a local table cannot check a key on a distributed
one). Existing documents get their contexts here, from their
stored chunks, tokenized with ``RAG_FTS_CONFIG`` as their chunks were: about as long as tokenizing the
collection's text once (a few seconds for 10k chunks).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from rag_service.config import load_settings
from rag_service.db import citus
from rag_service.db.contexts import write_contexts
from rag_service.keyword_text import create_keyword_text_function

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_log = logging.getLogger("alembic.runtime.migration")

_STATS_FUNCTION = """
CREATE OR REPLACE FUNCTION rag_context_stats_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO context_stats AS s (collection, context_count, context_length)
        VALUES (NEW.collection, 1, NEW.length)
        ON CONFLICT (collection) DO UPDATE
        SET context_count = s.context_count + 1, context_length = s.context_length + NEW.length;
    ELSE
        UPDATE context_stats SET context_count = context_count - 1, context_length = context_length - OLD.length
        WHERE collection = OLD.collection;
        DELETE FROM context_stats WHERE collection = OLD.collection AND context_count <= 0;
    END IF;
    RETURN NULL;
END $$
"""
_STATS_TRIGGER = (
    "CREATE TRIGGER document_contexts_stats AFTER INSERT OR DELETE ON document_contexts "
    "FOR EACH ROW EXECUTE FUNCTION rag_context_stats_row()"
)
_COUNT = (
    "INSERT INTO context_stats (collection, context_count, context_length) "
    "SELECT collection, count(*), sum(length) FROM document_contexts GROUP BY 1"
)


def upgrade() -> None:
    op.create_table(
        "context_stats",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("context_count", sa.BigInteger(), nullable=False),
        sa.Column("context_length", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("collection"),
    )
    op.create_table(
        "document_contexts",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("document_id", sa.BigInteger(), nullable=False),
        sa.Column("context_start", sa.Integer(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("collection", "document_id", "context_start", name="pk_document_contexts"),
        sa.ForeignKeyConstraint(
            ["collection", "document_id"],
            ["documents.collection", "documents.id"],
            ondelete="CASCADE",
            name="fk_document_contexts_document",
        ),
    )
    op.create_table(
        "context_terms",
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("document_id", sa.BigInteger(), nullable=False),
        sa.Column("context_start", sa.Integer(), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "collection", "document_id", "context_start", "lexeme", name="pk_context_terms", postgresql_include=["tf"]
        ),
        sa.ForeignKeyConstraint(
            ["collection", "document_id", "context_start"],
            ["document_contexts.collection", "document_contexts.document_id", "document_contexts.context_start"],
            ondelete="CASCADE",
            name="fk_context_terms_context",
        ),
    )
    bind = op.get_bind()
    if citus.distributed_tables(bind):  # a distributed database: the new tables join the others before they fill
        citus.distribute(bind)
    fts_config = load_settings().fts_config
    create_keyword_text_function(bind)  # write_contexts tokenizes through it (made again by 0021, its revision)
    for collection in bind.execute(sa.text("SELECT DISTINCT collection FROM documents")).scalars().all():
        ids = bind.execute(
            sa.text("SELECT id FROM documents WHERE collection = :c ORDER BY id"), {"c": collection}
        ).scalars()
        document_ids = list(ids)
        _log.info("contexts of %d documents of collection %r", len(document_ids), collection)
        write_contexts(bind, collection=collection, document_ids=document_ids, fts_config=fts_config, schema_0013=True)
    bind.execute(sa.text(_COUNT))
    bind.execute(sa.text(_STATS_FUNCTION))
    bind.execute(sa.text("SET LOCAL citus.enable_unsafe_triggers = on"))  # a placeholder setting without Citus
    bind.execute(sa.text(_STATS_TRIGGER))


def downgrade() -> None:
    op.drop_table("context_terms")
    op.drop_table("document_contexts")
    op.execute("DROP FUNCTION rag_context_stats_row()")
    op.drop_table("context_stats")
