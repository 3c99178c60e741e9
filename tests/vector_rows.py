"""Chunks made of given vectors, written straight to the tables (tests of the vector index, not of ingestion)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session


def insert_document(session: Session, collection: str) -> int:
    """A document row in ``collection`` for generated chunks; its id."""
    return int(
        session.execute(
            text(
                "INSERT INTO documents (collection, source, content, content_hash, chunker) "
                "VALUES (:c, 'gen.txt', 'x', 'h', 'test') RETURNING id"
            ),
            {"c": collection},
        ).scalar_one()
    )


def insert_vectors(session: Session, collection: str, vectors: np.ndarray) -> None:
    """One document of ``collection`` with a chunk per row of ``vectors`` (``chunk <i>``)."""
    doc_id = insert_document(session, collection)
    # one statement: the statistics triggers fire once for the set, not once a row
    session.execute(
        text(
            "INSERT INTO document_chunks (document_id, collection, chunk_index, chunk_type, content, start_char, "
            "end_char, token_count, content_hash, embedding, content_tsv) "
            "SELECT :d, :c, i - 1, 'text', 'chunk ' || (i - 1), 0, 1, 1, 'h' || (i - 1), CAST(v AS vector), "
            "to_tsvector('simple', 'chunk ' || (i - 1)) "
            "FROM unnest(CAST(:vs AS text[])) WITH ORDINALITY AS u(v, i)"
        ),
        {"d": doc_id, "c": collection, "vs": [str(v.tolist()) for v in vectors]},
    )
