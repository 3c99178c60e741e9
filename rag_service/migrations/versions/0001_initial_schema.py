"""Initial schema: pgvector, documents, chunks (HNSW + GIN), presets, index settings.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The design's presets, as literal values: a migration must not change when application code does.
PRESETS = [
    # context_type, expand_query, return_parents, diversity, max_chunks, max_tokens, description
    ("chatbot", True, True, 0.3, 8, 2000, "conversational answers: expanded query, sections, some diversity"),
    ("agent", False, True, 0.1, 5, 1500, "tool-using agents: precise query, few whole sections"),
    ("search", True, False, 0.4, 12, 3000, "search results: many diverse small chunks"),
    ("workflow", False, True, 0.0, 5, 1500, "deterministic pipelines: exact query, pure relevance"),
    ("context_engineering", True, True, 0.3, 10, 2500, "broad context for long prompts"),
]


def _timestamps() -> list[sa.Column]:  # type: ignore[type-arg]
    return [
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    ]


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "documents",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), server_default="", nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("chunker", sa.String(200), nullable=False),
        sa.Column("chunk_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("metadata", postgresql.JSONB(), server_default="{}", nullable=False),
        *_timestamps(),
        sa.UniqueConstraint("collection", "source", name="uq_documents_collection_source"),
    )

    op.create_table(
        "document_chunks",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column("document_id", sa.BigInteger(), sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("collection", sa.String(200), nullable=False),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("chunk_type", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("parent_content", sa.Text(), nullable=True),
        sa.Column("parent_start", sa.Integer(), nullable=True),
        sa.Column("parent_end", sa.Integer(), nullable=True),
        sa.Column("headers", postgresql.JSONB(), server_default="{}", nullable=False),
        sa.Column("header_path", sa.Text(), server_default="", nullable=False),
        sa.Column("start_char", sa.Integer(), nullable=False),
        sa.Column("end_char", sa.Integer(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.Vector(384), nullable=False),
        sa.Column("content_tsv", postgresql.TSVECTOR(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(), server_default="{}", nullable=False),
        sa.UniqueConstraint("document_id", "chunk_index", name="uq_document_chunks_document_index"),
        sa.CheckConstraint("start_char >= 0 AND end_char >= start_char", name="ck_document_chunks_offsets"),
    )
    op.create_index(
        "ix_document_chunks_embedding_hnsw",
        "document_chunks",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index("ix_document_chunks_content_tsv", "document_chunks", ["content_tsv"], postgresql_using="gin")
    op.create_index("ix_document_chunks_headers", "document_chunks", ["headers"], postgresql_using="gin")
    op.create_index("ix_document_chunks_collection", "document_chunks", ["collection"])
    op.create_index("ix_document_chunks_content_hash", "document_chunks", ["content_hash"])

    presets = op.create_table(
        "rag_configurations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("context_type", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("expand_query", sa.Boolean(), nullable=False),
        sa.Column("return_parents", sa.Boolean(), nullable=False),
        sa.Column("diversity", sa.Float(), nullable=False),
        sa.Column("max_chunks", sa.Integer(), nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=False),
        sa.Column("vector_weight", sa.Float(), server_default="0.7", nullable=False),
        sa.Column("keyword_weight", sa.Float(), server_default="0.3", nullable=False),
        sa.Column("rerank_enabled", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("rrf_k", sa.Integer(), server_default="60", nullable=False),
        sa.Column("fusion_method", sa.String(16), server_default="rrf", nullable=False),
        sa.Column("candidate_k", sa.Integer(), server_default="20", nullable=False),
        *_timestamps(),
        sa.CheckConstraint("diversity >= 0 AND diversity <= 1", name="ck_rag_configurations_diversity"),
        sa.CheckConstraint("max_chunks > 0 AND max_tokens > 0", name="ck_rag_configurations_limits"),
        sa.CheckConstraint(
            "vector_weight >= 0 AND keyword_weight >= 0 AND vector_weight + keyword_weight > 0",
            name="ck_rag_configurations_weights",
        ),
        sa.CheckConstraint("rrf_k > 0 AND candidate_k > 0", name="ck_rag_configurations_k"),
        sa.CheckConstraint("fusion_method IN ('rrf', 'linear')", name="ck_rag_configurations_fusion"),
    )
    op.bulk_insert(
        presets,
        [
            {
                "context_type": name,
                "expand_query": expand,
                "return_parents": parents,
                "diversity": diversity,
                "max_chunks": max_chunks,
                "max_tokens": max_tokens,
                "description": description,
                "vector_weight": 0.7,
                "keyword_weight": 0.3,
                "rerank_enabled": True,
                "rrf_k": 60,
                "fusion_method": "rrf",
                "candidate_k": 20,
            }
            for name, expand, parents, diversity, max_chunks, max_tokens, description in PRESETS
        ],
    )

    op.create_table(
        "index_settings",
        sa.Column("id", sa.SmallInteger(), primary_key=True),
        sa.Column("embedding_model", sa.Text(), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("fts_config", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("id = 1", name="ck_index_settings_single_row"),
    )


def downgrade() -> None:
    op.drop_table("index_settings")
    op.drop_table("rag_configurations")
    op.drop_table("document_chunks")
    op.drop_table("documents")
    op.execute("DROP EXTENSION IF EXISTS vector")
