"""A bulk load that replaces stored documents (``rag reindex --all``): their old rows cleared set-based.

``BulkLoad(replace=True)`` keeps each staged document's id (users filter by ``document_id``): the row is
updated in place when it is staged (readers keep seeing the old version until the load commits) and its
old chunks, postings, contexts, edges and links are cleared here, in ``finish``, once the load holds the
chunk tables' lock. Where the replaced documents are everything ``document_chunks`` holds (one
collection, wholly reindexed), the chunk tables are truncated: the load is then a first index, whose
indexes are dropped and rebuilt after it without the old rows (an index built in the transaction that
deleted them would still hold them), and readers wait for the commit. Otherwise (other collections
beside it, or documents the run could not rewrite and which keep their previous version) the rows are
deleted with the row triggers off and the indexes kept. Either way the collection's statistics rows
and packed postings go too: the load counts the statistics again over the whole collection, and the
next refresh packs the postings anew.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import BigInteger

#: the SQL condition on a chunk ``c`` of the documents ``clear_replaced`` cleared (in the same transaction)
REPLACED_SCOPE = "c.document_id IN (SELECT document_id FROM bulk_replaced)"

_STAGE_REPLACED = text(
    "CREATE TEMP TABLE bulk_replaced ON COMMIT DROP AS SELECT DISTINCT unnest(:ids) AS document_id"
).bindparams(bindparam("ids", type_=ARRAY(BigInteger)))
_REPLACED_KEY = text("ALTER TABLE bulk_replaced ADD PRIMARY KEY (document_id)")
# everything document_chunks holds is the replaced documents' (the collection's other documents hold no chunk)
_ONLY_REPLACED = text(
    "SELECT NOT EXISTS (SELECT 1 FROM document_chunks WHERE collection <> :collection) "
    "AND NOT EXISTS (SELECT 1 FROM document_chunks c WHERE c.collection = :collection "
    "AND NOT EXISTS (SELECT 1 FROM bulk_replaced r WHERE r.document_id = c.document_id))"
)
_TRUNCATE = text("TRUNCATE document_chunks, chunk_terms, document_contexts, context_terms, chunk_edges, chunk_links")
_DISABLE_DELETE_TRIGGERS = (
    text(
        "ALTER TABLE document_chunks DISABLE TRIGGER document_chunks_stats_delete, "
        "DISABLE TRIGGER document_chunks_packed_delete"
    ),
    text("ALTER TABLE document_contexts DISABLE TRIGGER document_contexts_stats"),
)
_ENABLE_DELETE_TRIGGERS = (
    text(
        "ALTER TABLE document_chunks ENABLE TRIGGER document_chunks_stats_delete, "
        "ENABLE TRIGGER document_chunks_packed_delete"
    ),
    text("ALTER TABLE document_contexts ENABLE TRIGGER document_contexts_stats"),
)
# postings and edges before their chunks, context postings before their contexts: no cascade left to run
_DELETE_OLD_ROWS = tuple(
    text(statement)
    for statement in (
        "DELETE FROM chunk_edges t USING document_chunks c, bulk_replaced r WHERE t.collection = :collection "
        "AND c.collection = :collection AND c.id = t.source_chunk_id AND r.document_id = c.document_id",
        "DELETE FROM chunk_edges t USING document_chunks c, bulk_replaced r WHERE t.collection = :collection "
        "AND c.collection = :collection AND c.id = t.target_chunk_id AND r.document_id = c.document_id",
        "DELETE FROM chunk_links t USING document_chunks c, bulk_replaced r WHERE t.collection = :collection "
        "AND c.collection = :collection AND c.id = t.source_chunk_id AND r.document_id = c.document_id",
        "DELETE FROM chunk_terms t USING document_chunks c, bulk_replaced r WHERE t.collection = :collection "
        "AND c.collection = :collection AND c.id = t.chunk_id AND r.document_id = c.document_id",
        "DELETE FROM context_terms t USING bulk_replaced r "
        "WHERE t.collection = :collection AND t.document_id = r.document_id",
        "DELETE FROM document_contexts t USING bulk_replaced r "
        "WHERE t.collection = :collection AND t.document_id = r.document_id",
        "DELETE FROM document_chunks t USING bulk_replaced r "
        "WHERE t.collection = :collection AND t.document_id = r.document_id",
    )
)
# the collection's statistics (counted again by the load) and packed postings (packed anew after it)
_FORGET_COLLECTION_ROWS = tuple(
    text(statement)
    for statement in (
        "DELETE FROM lexeme_stats WHERE collection = :collection",
        "DELETE FROM collection_stats WHERE collection = :collection",
        "DELETE FROM context_stats WHERE collection = :collection",
        "DELETE FROM bm25_packed_lists WHERE collection = :collection",
        "DELETE FROM bm25_packed_tombstones WHERE collection = :collection",
        "DELETE FROM bm25_packed_snapshots WHERE collection = :collection",
    )
)


def clear_replaced(session: Session, *, collection: str, document_ids: Sequence[int]) -> str:
    """Clear the old rows of ``document_ids`` (of ``collection``) in the load's transaction, which holds
    the chunk tables' lock; returns how (``truncated`` or ``deleted``)."""
    params = {"collection": collection}
    session.execute(_STAGE_REPLACED, {"ids": list(document_ids)})
    session.execute(_REPLACED_KEY)
    session.execute(text("ANALYZE bulk_replaced"))
    if session.execute(_ONLY_REPLACED, params).scalar_one():
        session.execute(_TRUNCATE)
        how = "truncated"
    else:
        for statement in (*_DISABLE_DELETE_TRIGGERS, *_DELETE_OLD_ROWS, *_ENABLE_DELETE_TRIGGERS):
            session.execute(statement, params)
        how = "deleted"
    for statement in _FORGET_COLLECTION_ROWS:
        session.execute(statement, params)
    return how
