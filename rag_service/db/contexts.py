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
once per load with its tokenizing on PostgreSQL's parallel workers), from the stored chunks, so every
path gets the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import BigInteger

from rag_service.db.bulk_replace import REPLACED_SCOPE
from rag_service.db.bulk_staging import run_in_parallel
from rag_service.db.citus import has_citus, insert_columns
from rag_service.keyword_text import BARE_TAG

#: a context longer than this (characters) is not stored, so its chunks have no context score: PostgreSQL's
#: tsvector holds at most 1 MB, and a document this long without sections says little as one unit
MAX_CONTEXT_CHARS = 200_000

# the text a context is matched with (c: its first chunk, d: its document), a bare <name>'s brackets read as spaces
# (the parser drops it as a tag; db.chunk_text.keyword_prefix gives a chunk's to its keyword text too)
_BODY = """regexp_replace(concat_ws(E'\\n',
            CASE WHEN d.title <> '' AND NOT starts_with(c.header_path, d.title) THEN d.title END,
            nullif(c.header_path, ''),
            CASE WHEN c.parent_start IS NULL THEN d.content ELSE c.parent_content END),
        '""" + BARE_TAG + """', ' \\1 ', 'g')"""
# a chunk that has a context: in a section, or in a document without sections
_HAS_CONTEXT = """(c.parent_start IS NOT NULL OR NOT EXISTS (
            SELECT 1 FROM document_chunks s WHERE s.collection = :collection AND s.document_id = c.document_id
            AND s.parent_start IS NOT NULL))"""
#: the length BM25 normalises by, of a tsvector ``{tsv}``: lexeme occurrences, one without positions counted
#: once (what the row trigger rag_chunk_lexeme_count() computes for a chunk)
TSV_LENGTH = "(SELECT coalesce(sum(greatest(coalesce(cardinality(u.positions), 0), 1)), 0) FROM unnest({tsv}) AS u)"
# the first chunk of each context of the documents ``{scope}`` selects (its header path and parent text
# are the context's)
_FIRST_CHUNKS_SQL = f"""
SELECT DISTINCT ON (c.document_id, coalesce(c.parent_start, -1)) c.id
FROM document_chunks c
WHERE c.collection = :collection AND {{scope}} AND {_HAS_CONTEXT}
ORDER BY c.document_id, coalesce(c.parent_start, -1), c.chunk_index
"""  # noqa: S608 (constants of this module only)
#: the mean of the stored vectors of context ``v``'s chunks in collection ``{collection}`` (an SQL expression; read
#: through the (collection, document, chunk index) key)
CONTEXT_MEAN_VECTOR = (
    "(SELECT avg(s.embedding) FROM document_chunks s WHERE s.collection = {collection} "
    "AND s.document_id = v.document_id AND coalesce(s.parent_start, -1) = v.context_start)"
)


def _insert_contexts(vectors: str, *, mean_vector: bool = True) -> str:
    """The insert of the contexts in ``vectors`` (document_id, context_start, tsv); without ``mean_vector`` as the
    schema stood at migration 0013, which writes stored documents' contexts (0015 adds the column). The collection
    is cast: bare, its first use (the select list) would type it text and the second varchar."""
    collection = "CAST(:collection AS varchar)"
    columns = "collection, document_id, context_start, length"
    values = f"{collection}, v.document_id, v.context_start, " + TSV_LENGTH.format(tsv="v.tsv")
    if mean_vector:
        columns += ", embedding"
        values += ", " + CONTEXT_MEAN_VECTOR.format(collection=collection)
    return f"INSERT INTO document_contexts ({columns}) SELECT {values} FROM {vectors} v"  # noqa: S608 (constants)


_INSERT_TERMS = (
    "INSERT INTO context_terms (collection, document_id, context_start, lexeme, tf) "
    "SELECT :collection, v.document_id, v.context_start, u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1) "
    "FROM {vectors} v, unnest(v.tsv) AS u"
)

# the first chunks, each context's text built for them only (MATERIALIZED: else the length filter is planned
# below the first-chunk DISTINCT, and a 1 MB document of 2,500 chunks took 14 s building its text per chunk),
# then its tsvector computed once (MATERIALIZED) for both the context row and its postings
_VECTORS_SQL = f"""
WITH firsts AS ({_FIRST_CHUNKS_SQL.format(scope="c.document_id = ANY(:document_ids)")}
), heads AS MATERIALIZED (
    SELECT c.document_id, coalesce(c.parent_start, -1) AS context_start, {_BODY} AS body
    FROM firsts f
    JOIN document_chunks c ON c.collection = :collection AND c.id = f.id
    JOIN documents d ON d.collection = c.collection AND d.id = c.document_id
), vectors AS MATERIALIZED (
    SELECT document_id, context_start, to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text(body)) AS tsv
    FROM heads WHERE length(body) <= :max_chars
)"""  # noqa: S608 (constants of this module only)
_WRITE_SQL = f"""{_VECTORS_SQL}, contexts AS ({{insert}}
    RETURNING document_id
)
{_INSERT_TERMS.format(vectors="vectors")}
"""
_WRITE, _WRITE_0013 = (
    text(_WRITE_SQL.format(insert=_insert_contexts("vectors", mean_vector=mean))).bindparams(
        bindparam("document_ids", type_=ARRAY(BigInteger))
    )
    for mean in (True, False)
)

# The bulk load's three steps: the same rows, the tokenizing (most of the time) in a query PostgreSQL
# can run in parallel (a data-modifying statement never is): each context's first chunk, then the
# contexts' tsvectors into a temporary table, then the two inserts from it (the length there: in the
# parallel statement it would tokenize twice).
_FIRST_CHUNKS = text(_FIRST_CHUNKS_SQL.format(scope="TRUE"))
_FIRST_REPLACED_CHUNKS = text(_FIRST_CHUNKS_SQL.format(scope=REPLACED_SCOPE))
_BULK_VECTORS_SQL = f"""
CREATE TEMP TABLE bulk_contexts ON COMMIT DROP AS
SELECT c.document_id, coalesce(c.parent_start, -1) AS context_start,
    to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text({_BODY})) AS tsv
FROM document_chunks c
JOIN documents d ON d.collection = c.collection AND d.id = c.document_id
WHERE c.collection = :collection AND d.collection = :collection AND c.id = ANY(:first_chunks)
    AND length({_BODY}) <= :max_chars
"""  # noqa: S608 (constants of this module only)
_BULK_VECTORS = text(_BULK_VECTORS_SQL).bindparams(bindparam("first_chunks", type_=ARRAY(BigInteger)))
_BULK_CONTEXTS = text(_insert_contexts("bulk_contexts"))
_BULK_TERMS = text(_INSERT_TERMS.format(vectors="bulk_contexts"))
_DELETE = text(
    "DELETE FROM document_contexts WHERE collection = :collection AND document_id = ANY(:document_ids)"
).bindparams(bindparam("document_ids", type_=ARRAY(BigInteger)))


def write_contexts(
    session: Session | Connection,
    *,
    collection: str,
    document_ids: Sequence[int],
    fts_config: str,
    schema_0013: bool = False,
) -> None:
    """Write the contexts and postings of ``document_ids`` from their stored chunks (none stored yet);
    ``schema_0013``: without the mean vectors, whose column migration 0015 adds (for migration 0013's backfill)."""
    if not document_ids:
        return
    params = {
        "collection": collection,
        "document_ids": list(document_ids),
        "fts_config": fts_config,
        "max_chars": MAX_CONTEXT_CHARS,
    }
    if has_citus(session if isinstance(session, Connection) else session.connection()):
        _write_contexts_on_citus(session, params, mean=not schema_0013)
    else:
        session.execute(_WRITE_0013 if schema_0013 else _WRITE, params)


# Citus: the same rows read by one single-shard SELECT, then inserted from arrays, which Citus routes to the
# collection's shard. _WRITE's data-modifying CTEs are planned in steps whose intermediate results go to every
# worker, so one worker down failed each document's write into every collection.
_CITUS_ROWS_SQL = f"""{_VECTORS_SQL}
SELECT v.document_id, v.context_start, {TSV_LENGTH.format(tsv="v.tsv")}, CAST({{mean}} AS text),
    ARRAY(SELECT u.lexeme FROM unnest(v.tsv) AS u),
    ARRAY(SELECT greatest(coalesce(cardinality(u.positions), 0), 1) FROM unnest(v.tsv) AS u)
FROM vectors v
"""  # noqa: S608 (constants of this module only)
_CITUS_ROWS, _CITUS_ROWS_0013 = (
    text(_CITUS_ROWS_SQL.format(mean=mean)).bindparams(bindparam("document_ids", type_=ARRAY(BigInteger)))
    for mean in (CONTEXT_MEAN_VECTOR.format(collection=":collection"), "NULL")
)
_CITUS_CONTEXTS_SQL = (
    "INSERT INTO document_contexts (collection, document_id, context_start, length, embedding) "
    "SELECT CAST(:collection AS varchar), u.d, u.s, u.l, CAST(u.e AS vector) FROM unnest(CAST(:documents AS bigint[]), "
    "CAST(:starts AS integer[]), CAST(:lengths AS integer[]), CAST(:vectors AS text[])) AS u(d, s, l, e)"
)
_CITUS_CONTEXTS = text(_CITUS_CONTEXTS_SQL)
_CITUS_CONTEXTS_0013 = text(
    _CITUS_CONTEXTS_SQL.replace(", embedding", "").replace(", CAST(u.e AS vector)", "")
)  # below migration 0015: no mean vectors
_CITUS_TERMS = text(
    "INSERT INTO context_terms (collection, document_id, context_start, lexeme, tf) "
    "SELECT CAST(:collection AS varchar), u.d, u.s, u.x, u.t FROM unnest(CAST(:documents AS bigint[]), "
    "CAST(:starts AS integer[]), CAST(:lexemes AS text[]), CAST(:tfs AS integer[])) AS u(d, s, x, t)"
)


def _write_contexts_on_citus(session: Session | Connection, params: dict[str, object], *, mean: bool) -> None:
    rows = session.execute(_CITUS_ROWS if mean else _CITUS_ROWS_0013, params).all()
    collection = params["collection"]
    contexts = ("documents", "starts", "lengths", "vectors")
    insert_columns(session, _CITUS_CONTEXTS if mean else _CITUS_CONTEXTS_0013, contexts, rows, collection=collection)
    terms = [(row[0], row[1], lexeme, tf) for row in rows for lexeme, tf in zip(row[4], row[5], strict=True)]
    insert_columns(session, _CITUS_TERMS, ("documents", "starts", "lexemes", "tfs"), terms, collection=collection)


def write_collection_contexts(
    session: Session | Connection, *, collection: str, fts_config: str, replaced: bool = False
) -> None:
    """Write the contexts and postings of every document of ``collection`` (none stored yet), as
    ``write_contexts`` would, for a bulk load: the tokenizing may run on parallel workers. ``replaced``:
    only of the documents a replacing load cleared (``db.bulk_replace``); the others keep theirs."""
    first = _FIRST_REPLACED_CHUNKS if replaced else _FIRST_CHUNKS
    first_chunks = list(session.execute(first, {"collection": collection}).scalars())
    params = {"collection": collection, "fts_config": fts_config, "max_chars": MAX_CONTEXT_CHARS}
    run_in_parallel(session, _BULK_VECTORS, {**params, "first_chunks": first_chunks})
    session.execute(_BULK_CONTEXTS, params)
    session.execute(_BULK_TERMS, params)
    session.execute(text("DROP TABLE bulk_contexts"))


def delete_contexts(session: Session | Connection, *, collection: str, document_ids: Sequence[int]) -> None:
    """Delete the contexts of ``document_ids`` (their postings cascade; the trigger uncounts them)."""
    if document_ids:
        session.execute(_DELETE, {"collection": collection, "document_ids": list(document_ids)})
