"""ORM models; the migrations in ``rag_service/migrations/versions`` create exactly these (``alembic check`` agrees)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from rag_service.config import SCHEMA_EMBEDDING_DIM
from rag_service.db.vector_type import BinaryVector
from rag_service.knobs import MAX_COLLECTION_CHARS, MAX_PRESET_NAME_CHARS, PRESET_KNOBS


class Base(DeclarativeBase):
    """Declarative base of every table."""


class Document(Base):
    """One source document of a collection, with its full (normalised) text.

    Every key starts with ``collection`` (migration 0005), so the table can be distributed (Citus) or
    partitioned by it; ``id`` still comes from one sequence and is unique on its own.
    """

    __tablename__ = "documents"
    __table_args__ = (
        PrimaryKeyConstraint("collection", "id", name="documents_pkey"),
        UniqueConstraint("collection", "source", name="uq_documents_collection_source"),
    )

    id: Mapped[int] = mapped_column(BigInteger, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    content: Mapped[str] = mapped_column(Text, nullable=False)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    chunker: Mapped[str] = mapped_column(String(200), nullable=False)
    chunk_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    #: the folder a relative ``source`` is relative to (migration 0019); '' for a text, NULL where not known
    origin: Mapped[str | None] = mapped_column(Text, nullable=True)


class DocumentChunk(Base):
    """A chunk: its text and offsets, its section (parent), its vector and its stored tsvector."""

    __tablename__ = "document_chunks"
    __table_args__ = (
        PrimaryKeyConstraint("collection", "id", name="document_chunks_pkey"),
        UniqueConstraint("collection", "document_id", "chunk_index", name="uq_document_chunks_document_index"),
        ForeignKeyConstraint(
            ["collection", "document_id"],
            ["documents.collection", "documents.id"],
            ondelete="CASCADE",
            name="fk_document_chunks_document",
        ),
        Index(
            "ix_document_chunks_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 128},  # migration 0012
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        Index("ix_document_chunks_content_tsv", "content_tsv", postgresql_using="gin"),
        Index("ix_document_chunks_headers", "headers", postgresql_using="gin"),
        Index("ix_document_chunks_content_hash", "collection", "content_hash"),
        CheckConstraint("start_char >= 0 AND end_char >= start_char", name="ck_document_chunks_offsets"),
    )

    id: Mapped[int] = mapped_column(BigInteger, autoincrement=True)
    document_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), nullable=False)
    chunk_index: Mapped[int] = mapped_column(Integer, nullable=False)
    chunk_type: Mapped[str] = mapped_column(String(16), nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False)
    parent_content: Mapped[str | None] = mapped_column(Text)
    parent_start: Mapped[int | None] = mapped_column(Integer)
    parent_end: Mapped[int | None] = mapped_column(Integer)
    headers: Mapped[dict[str, str]] = mapped_column(JSONB, nullable=False, server_default="{}")
    header_path: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    start_char: Mapped[int] = mapped_column(Integer, nullable=False)
    end_char: Mapped[int] = mapped_column(Integer, nullable=False)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    embedding: Mapped[Any] = mapped_column(BinaryVector(SCHEMA_EMBEDDING_DIM), nullable=False)
    content_tsv: Mapped[Any] = mapped_column(TSVECTOR, nullable=False)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default="{}")
    #: number of lexeme occurrences in ``content_tsv`` (BM25's document length); set by a trigger
    lexeme_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")


class ChunkTerm(Base):
    """A posting: one lexeme of one chunk with its term frequency; maintained by triggers."""

    __tablename__ = "chunk_terms"
    __table_args__ = (
        # covering: the bounded BM25 arm completes chunks' scores from it index-only (migration 0005)
        PrimaryKeyConstraint(
            "collection", "chunk_id", "lexeme", name="pk_chunk_terms", postgresql_include=["tf", "doc_len"]
        ),
        # len / tf orders a lexeme's postings by BM25 score, highest first (migration 0004)
        Index(
            "ix_chunk_terms_impact",
            "collection",
            "lexeme",
            text("(CAST(doc_len AS DOUBLE PRECISION) / CAST(tf AS DOUBLE PRECISION))"),
            postgresql_include=["chunk_id", "tf", "doc_len"],
        ),
    )

    chunk_id: Mapped[int] = mapped_column(BigInteger)
    lexeme: Mapped[str] = mapped_column(Text)
    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), nullable=False)
    tf: Mapped[int] = mapped_column(Integer, nullable=False)
    doc_len: Mapped[int] = mapped_column(Integer, nullable=False)


class LexemeStats(Base):
    """Document frequency of a lexeme within a collection; maintained by triggers."""

    __tablename__ = "lexeme_stats"

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), primary_key=True)
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    doc_freq: Mapped[int] = mapped_column(Integer, nullable=False)


class CollectionStats(Base):
    """Chunk count and total length (in lexemes) of a collection; maintained by triggers."""

    __tablename__ = "collection_stats"

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), primary_key=True)
    chunk_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    total_length: Mapped[int] = mapped_column(BigInteger, nullable=False)


class ContextStats(Base):
    """Context count and total length (in lexemes) of a collection; kept by a row trigger on
    ``document_contexts`` (migration 0013), apart from ``collection_stats``, whose triggers re-create
    its row when a statement takes a collection's chunk count through zero."""

    __tablename__ = "context_stats"

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), primary_key=True)
    context_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    context_length: Mapped[int] = mapped_column(BigInteger, nullable=False)


class PackedSnapshot(Base):
    """A collection's packed postings (``db.packed_postings``): chunks ``base_id``..``max_id`` as of the build;
    ``ready`` once ``bm25_packed_lists`` holds them (a row not ready makes deletes record tombstones meanwhile)."""

    __tablename__ = "bm25_packed_snapshots"

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), primary_key=True)
    base_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    max_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    chunk_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    ready: Mapped[bool] = mapped_column(Boolean, nullable=False)
    built_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class PackedList(Base):
    """One lexeme's postings in a collection's snapshot, as ``rag_bm25_pack`` writes them (``ext/rag_bm25``)."""

    __tablename__ = "bm25_packed_lists"
    __table_args__ = (PrimaryKeyConstraint("collection", "lexeme", name="pk_bm25_packed_lists"),)

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS))
    lexeme: Mapped[str] = mapped_column(Text)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)


class PackedTombstone(Base):
    """A chunk deleted or rewritten since its collection's snapshot: its packed postings are stale (trigger,
    migration 0014)."""

    __tablename__ = "bm25_packed_tombstones"
    __table_args__ = (PrimaryKeyConstraint("collection", "chunk_id", name="pk_bm25_packed_tombstones"),)

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS))
    chunk_id: Mapped[int] = mapped_column(BigInteger)
    #: updated in place (it still exists, with other postings: scored in SQL), not deleted
    rewritten: Mapped[bool] = mapped_column(Boolean, nullable=False)


class DocumentContext(Base):
    """A chunk's context: its section (``context_start`` = the section's ``parent_start``) or, in a document
    without sections, the whole document (``context_start`` -1); ``length`` in lexemes, as a chunk's
    ``lexeme_count``. Written with the chunks (``db.contexts``); counted into ``context_stats`` by a
    row trigger (migration 0013)."""

    __tablename__ = "document_contexts"
    __table_args__ = (
        PrimaryKeyConstraint("collection", "document_id", "context_start", name="pk_document_contexts"),
        ForeignKeyConstraint(
            ["collection", "document_id"],
            ["documents.collection", "documents.id"],
            ondelete="CASCADE",
            name="fk_document_contexts_document",
        ),
    )

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS))
    document_id: Mapped[int] = mapped_column(BigInteger)
    context_start: Mapped[int] = mapped_column(Integer)
    length: Mapped[int] = mapped_column(Integer, nullable=False)
    #: the mean of its chunks' vectors (the context similarity, ``db.context_vector``; migration 0015)
    embedding: Mapped[Any] = mapped_column(BinaryVector(SCHEMA_EMBEDDING_DIM), nullable=True)


class ContextTerm(Base):
    """A context's posting: one lexeme of one context with its term frequency (the context BM25)."""

    __tablename__ = "context_terms"
    __table_args__ = (
        PrimaryKeyConstraint(
            "collection", "document_id", "context_start", "lexeme", name="pk_context_terms", postgresql_include=["tf"]
        ),
        ForeignKeyConstraint(
            ["collection", "document_id", "context_start"],
            ["document_contexts.collection", "document_contexts.document_id", "document_contexts.context_start"],
            ondelete="CASCADE",
            name="fk_context_terms_context",
        ),
    )

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS))
    document_id: Mapped[int] = mapped_column(BigInteger)
    context_start: Mapped[int] = mapped_column(Integer)
    lexeme: Mapped[str] = mapped_column(Text)
    tf: Mapped[int] = mapped_column(Integer, nullable=False)


def _preset_default(name: str) -> str:
    """The column default of a preset knob, as SQL text: its one definition (``knobs.PRESET_KNOBS``)."""
    value = PRESET_KNOBS[name].default
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


class RagConfiguration(Base):
    """One context preset; ``retrieve(context=...)`` reads its row at call time."""

    __tablename__ = "rag_configurations"
    __table_args__ = (
        CheckConstraint("diversity >= 0 AND diversity <= 1", name="ck_rag_configurations_diversity"),
        CheckConstraint("max_chunks > 0 AND max_tokens > 0", name="ck_rag_configurations_limits"),
        CheckConstraint(
            "vector_weight >= 0 AND keyword_weight >= 0 AND vector_weight + keyword_weight > 0",
            name="ck_rag_configurations_weights",
        ),
        CheckConstraint("rrf_k > 0 AND candidate_k > 0", name="ck_rag_configurations_k"),
        CheckConstraint("fusion_method IN ('rrf', 'linear')", name="ck_rag_configurations_fusion"),
        CheckConstraint("keyword_scorer IN ('bm25', 'ts_rank_cd')", name="ck_rag_configurations_keyword_scorer"),
        CheckConstraint("graph_weight >= 0 AND graph_weight <= 1", name="ck_rag_configurations_graph_weight"),
        CheckConstraint("min_relevance >= 0 AND min_relevance <= 1", name="ck_rag_configurations_min_relevance"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    context_type: Mapped[str] = mapped_column(String(MAX_PRESET_NAME_CHARS), nullable=False, unique=True)
    description: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    expand_query: Mapped[bool] = mapped_column(Boolean, nullable=False)
    return_parents: Mapped[bool] = mapped_column(Boolean, nullable=False)
    diversity: Mapped[float] = mapped_column(Float, nullable=False)
    max_chunks: Mapped[int] = mapped_column(Integer, nullable=False)
    max_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    vector_weight: Mapped[float] = mapped_column(Float, nullable=False, server_default=_preset_default("vector_weight"))
    keyword_weight: Mapped[float] = mapped_column(
        Float, nullable=False, server_default=_preset_default("keyword_weight")
    )
    rerank_enabled: Mapped[bool] = mapped_column(
        Boolean, nullable=False, server_default=_preset_default("rerank_enabled")
    )
    rrf_k: Mapped[int] = mapped_column(Integer, nullable=False, server_default=_preset_default("rrf_k"))
    fusion_method: Mapped[str] = mapped_column(
        String(16), nullable=False, server_default=_preset_default("fusion_method")
    )
    candidate_k: Mapped[int] = mapped_column(Integer, nullable=False, server_default=_preset_default("candidate_k"))
    keyword_scorer: Mapped[str] = mapped_column(
        String(16), nullable=False, server_default=_preset_default("keyword_scorer")
    )
    #: the formatter shows document summaries and chunk keywords (migration 0007)
    show_metadata: Mapped[bool] = mapped_column(
        Boolean, nullable=False, server_default=_preset_default("show_metadata")
    )
    #: share of the graph walk in the ranking (0 = off); migration 0006
    graph_weight: Mapped[float] = mapped_column(Float, nullable=False, server_default=_preset_default("graph_weight"))
    #: a first result below this relevance drops all, else those below 0.4 of it go (0 = keep all); 0009, 0011
    min_relevance: Mapped[float] = mapped_column(Float, nullable=False, server_default=_preset_default("min_relevance"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())


class ChunkEdge(Base):
    """An edge of the chunk graph of one collection (migration 0006); written with the chunks it joins.

    No foreign key on the chunk ids: the key leads with ``collection`` so the table can be
    distributed like the chunks; whoever deletes or replaces chunks deletes their edges in the same
    transaction (``rag_service.db.graph``).
    """

    __tablename__ = "chunk_edges"
    __table_args__ = (
        # weight included: the graph walk reads a chunk's edges with an index-only scan (migration 0006)
        PrimaryKeyConstraint(
            "collection",
            "source_chunk_id",
            "target_chunk_id",
            "kind",
            name="chunk_edges_pkey",
            postgresql_include=["weight"],
        ),
        Index("ix_chunk_edges_target", "collection", "target_chunk_id"),
        CheckConstraint("weight > 0", name="ck_chunk_edges_weight"),
    )

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), primary_key=True)
    source_chunk_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    target_chunk_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    #: ``similar``, ``sibling``, ``parent``, ``child``, ``link`` or ``backlink``
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    weight: Mapped[float] = mapped_column(Float, nullable=False)


class ChunkLink(Base):
    """A link written in a chunk, kept unresolved so edges can follow when its target document changes."""

    __tablename__ = "chunk_links"
    __table_args__ = (Index("ix_chunk_links_target", "collection", "target_key"),)

    collection: Mapped[str] = mapped_column(String(MAX_COLLECTION_CHARS), primary_key=True)
    source_chunk_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    #: the linked document's source without its suffix (``docs/guide/install`` for ``install.md``)
    target_key: Mapped[str] = mapped_column(Text, primary_key=True)
    #: the ``#anchor`` slug, or '' for the whole document
    anchor: Mapped[str] = mapped_column(Text, primary_key=True)


class IndexSettings(Base):
    """The single row recording which embedding model and dimension the stored vectors come from."""

    __tablename__ = "index_settings"
    __table_args__ = (CheckConstraint("id = 1", name="ck_index_settings_single_row"),)

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    embedding_model: Mapped[str] = mapped_column(Text, nullable=False)
    embedding_dim: Mapped[int] = mapped_column(Integer, nullable=False)
    fts_config: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    #: the model ``rag reindex --all`` is re-embedding every collection with (migration 0008); None: no switch
    switching_to: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the vector indexes' definitions while a switch to another dimension has dropped them (migration 0018)
    vector_indexes: Mapped[list[str] | None] = mapped_column(ARRAY(Text), nullable=True)


class SwitchVector(Base):
    """A vector a switch of the embedding model embedded, kept until the switch ends (migration 0020), so a run
    stopped midway does not embed it again (``db.switch_vectors``)."""

    __tablename__ = "model_switch_vectors"

    model: Mapped[str] = mapped_column(Text, primary_key=True)
    #: the hash of the text the vector embeds, as ``document_chunks.content_hash``
    content_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    embedding: Mapped[Any] = mapped_column(BinaryVector(None), nullable=False)
