"""Copies of a collection made in SQL (no re-embedding): many near-identical collections in one index."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

_COPY = (
    """CREATE TEMP TABLE doc_map ON COMMIT DROP AS
    SELECT id AS old_id, nextval(pg_get_serial_sequence('documents', 'id')) AS new_id
    FROM documents WHERE collection = :source""",
    """INSERT INTO documents (id, collection, source, title, content, content_hash, chunker, chunk_count, metadata)
    SELECT m.new_id, :target, d.source, d.title, d.content, d.content_hash, d.chunker, d.chunk_count, d.metadata
    FROM documents d JOIN doc_map m ON m.old_id = d.id WHERE d.collection = :source""",
    # uniform noise of amplitude :noise on every component (a correlated subquery: new per row)
    """INSERT INTO document_chunks (document_id, collection, chunk_index, chunk_type, content, parent_content,
        parent_start, parent_end, headers, header_path, start_char, end_char, token_count, content_hash,
        embedding, content_tsv, metadata)
    SELECT m.new_id, :target, c.chunk_index, c.chunk_type, c.content, c.parent_content, c.parent_start,
        c.parent_end, c.headers, c.header_path, c.start_char, c.end_char, c.token_count, c.content_hash,
        CASE WHEN :noise = 0 THEN c.embedding ELSE c.embedding + (
            SELECT array_agg(((random() - 0.5) * :noise)::real)::vector
            FROM generate_series(1, vector_dims(c.embedding)) WHERE c.id IS NOT NULL) END,
        c.content_tsv, c.metadata
    FROM document_chunks c JOIN doc_map m ON m.old_id = c.document_id WHERE c.collection = :source""",
)


def copy_collection(session: Session, *, source: str, target: str, noise: float = 0.0) -> None:
    """Copy ``source``'s documents and chunks into ``target`` (empty), each vector plus uniform noise
    of amplitude ``noise`` per component (0: the same vectors). Triggers keep the BM25 postings."""
    for statement in _COPY:
        session.execute(text(statement), {"source": source, "target": target, "noise": float(noise)})
