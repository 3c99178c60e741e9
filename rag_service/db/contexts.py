"""Each chunk's context and its postings, for the context BM25 (a section scored as one document).

A chunk's context is its section (the parent it is expanded to, keyed by ``parent_start``) or, in a
document without sections, the whole document (``context_start`` -1). A chunk outside the sections of a
document that has some (a module's top level beside its classes) has none: the whole document would be
a larger context than its neighbours' sections, not a comparable one. A context's text is what its
chunks are matched with: the document title and the section's header path (``search_prefix``), then
the section (or document) text, tokenized once by PostgreSQL into ``context_terms`` (lexeme, tf) and
its length into ``document_contexts``; a row trigger (migration 0013) counts each collection's contexts and
their total length into ``context_stats``, which the search reads as the contexts' average length.

Why: a section holding every word of a question across several chunks is a better answer than one
chunk holding some of them; the chunks' own BM25 cannot see that (docs/benchmarks.md, "Session 14").
Written after a document's chunks, in the same transaction (the row path per document, the bulk path
once per load), from the stored chunks, so every path gets the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import BigInteger

#: a context longer than this (characters) is not stored, so its chunks have no context score: PostgreSQL's
#: tsvector holds at most 1 MB, and a document this long without sections says little as one unit
MAX_CONTEXT_CHARS = 200_000

# the first chunk of each context (its header path and parent text are the context's), then its tsvector
# computed once (MATERIALIZED) for both the context row and its postings
_WRITE_SQL = """
WITH heads AS (
    SELECT DISTINCT ON (c.document_id, coalesce(c.parent_start, -1))
        c.document_id, coalesce(c.parent_start, -1) AS context_start,
        concat_ws(E'\\n',
            CASE WHEN d.title <> '' AND NOT starts_with(c.header_path, d.title) THEN d.title END,
            nullif(c.header_path, ''),
            CASE WHEN c.parent_start IS NULL THEN d.content ELSE c.parent_content END) AS body
    FROM document_chunks c
    JOIN documents d ON d.collection = c.collection AND d.id = c.document_id
    WHERE c.collection = :collection AND d.collection = :collection AND c.document_id = ANY(:document_ids)
        AND (c.parent_start IS NOT NULL OR NOT EXISTS (
            SELECT 1 FROM document_chunks s WHERE s.collection = :collection AND s.document_id = c.document_id
            AND s.parent_start IS NOT NULL))
    ORDER BY c.document_id, coalesce(c.parent_start, -1), c.chunk_index
), vectors AS MATERIALIZED (
    SELECT document_id, context_start, to_tsvector(CAST(:fts_config AS regconfig), body) AS tsv
    FROM heads WHERE length(body) <= :max_chars
), contexts AS (
    INSERT INTO document_contexts (collection, document_id, context_start, length)
    SELECT :collection, v.document_id, v.context_start,
        (SELECT coalesce(sum(greatest(coalesce(cardinality(u.positions), 0), 1)), 0) FROM unnest(v.tsv) AS u)
    FROM vectors v
    RETURNING document_id
)
INSERT INTO context_terms (collection, document_id, context_start, lexeme, tf)
SELECT :collection, v.document_id, v.context_start, u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1)
FROM vectors v, unnest(v.tsv) AS u
"""
_WRITE = text(_WRITE_SQL).bindparams(bindparam("document_ids", type_=ARRAY(BigInteger)))
_DELETE = text(
    "DELETE FROM document_contexts WHERE collection = :collection AND document_id = ANY(:document_ids)"
).bindparams(bindparam("document_ids", type_=ARRAY(BigInteger)))


def write_contexts(
    session: Session | Connection, *, collection: str, document_ids: Sequence[int], fts_config: str
) -> None:
    """Write the contexts and postings of ``document_ids`` from their stored chunks (none stored yet)."""
    if document_ids:
        session.execute(
            _WRITE,
            {
                "collection": collection,
                "document_ids": list(document_ids),
                "fts_config": fts_config,
                "max_chars": MAX_CONTEXT_CHARS,
            },
        )


def delete_contexts(session: Session | Connection, *, collection: str, document_ids: Sequence[int]) -> None:
    """Delete the contexts of ``document_ids`` (their postings cascade; the trigger uncounts them)."""
    if document_ids:
        session.execute(_DELETE, {"collection": collection, "document_ids": list(document_ids)})
