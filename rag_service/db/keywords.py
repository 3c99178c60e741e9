"""A chunk's keywords: its most distinctive terms by the BM25 statistics the database keeps.

A chunk's terms are the lexemes of its text (``to_tsvector``, as its stored tsvector has them); each is
weighted as BM25 weighs a one-word query on it: ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len /
avglen))``, with the collection's document frequencies (``lexeme_stats``) and size (``collection_stats``)
kept by the triggers of migration 0002. The best ``keyword_count`` become ``metadata.keywords``, each
shown as the first word of the chunk that stems to it, else the first hyphenated or dotted compound
(``per-tenant`` for the parser's ``per-ten``), else the lexeme itself. Lexemes without a letter, with
more digits than other characters (hashes, ids), of one letter or over 40 characters are left out.

Keywords are computed when a chunk is written, against the statistics at that moment (the chunk itself
counted in), so the first documents of a new collection see few others; ``rag metadata build``
recomputes them against the whole collection (``backfill_keywords``).
"""

from __future__ import annotations

import json

from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.db.citus import has_citus
from rag_service.knobs import CHUNK_KEYWORDS

#: keywords per chunk unless ``RAG_CHUNK_KEYWORDS`` says otherwise (``knobs.CHUNK_KEYWORDS``)
DEFAULT_KEYWORD_COUNT: int = CHUNK_KEYWORDS.default

#: the terms of a text worth a keyword, ``t`` (lexeme, tf, len: the text's length in such terms), for
#: ``str.format``: ``key`` columns kept beside them, ``source`` what ``text`` comes from, ``window`` one text
KEYWORD_TERMS_SQL = """SELECT {key}u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1)::float8 AS tf,
               sum(greatest(coalesce(cardinality(u.positions), 0), 1)) OVER ({window})::float8 AS len
        FROM {source}unnest(to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text(CAST({text} AS text)))) AS u
        -- digits counted with translate(): a regexp_replace here was a third of the statement's time
        WHERE length(u.lexeme) BETWEEN 2 AND 40
          AND 2 * (length(u.lexeme) - length(translate(u.lexeme, '0123456789', ''))) <= length(u.lexeme)
          AND u.lexeme ~ '[[:alpha:]]'"""
#: a term's weight: BM25 of a one-word query on it, ``t`` the term, ``c`` (n, avglen) and ``d`` (df) its statistics
KEYWORD_SCORE_SQL = """ln(1.0 + (c.n - d.df + 0.5) / (d.df + 0.5)) * t.tf * (:bm25_k1 + 1.0)
               / (t.tf + :bm25_k1 * (1.0 - :bm25_b + :bm25_b * t.len / c.avglen))"""
#: the statistics ``c`` and ``d`` a term ``t`` is scored with, for ``str.format``: ``count`` and ``total`` the
#: chunks and their summed length before this one, ``df`` how many of them hold the lexeme (NULL: none);
#: ``:self_count`` 1 counts the chunk itself in (it is being written), 0 when it already is (a backfill)
KEYWORD_STATISTICS_SQL = """CROSS JOIN LATERAL (SELECT {count} + :self_count AS n, ({total})::float8 AS total) c0
    CROSS JOIN LATERAL (
        SELECT c0.n, greatest(c0.total + :self_count * t.len, 1.0) / greatest(c0.n, 1) AS avglen
    ) c
    CROSS JOIN LATERAL (SELECT greatest(coalesce({df}, 0) + :self_count, 1)::float8 AS df) d"""
#: the keywords shown for ``{lexemes}`` (text[]: the best lexemes of ``:content``, best first): a SELECT of one
#: jsonb array, for ``str.format`` (``{config}`` the regconfig)
KEYWORDS_SHOWN_SQL = """SELECT coalesce(jsonb_agg(d.word ORDER BY d.rank), '[]'::jsonb) FROM (
-- a word once, at its best rank: ``not_found_error`` stems to two lexemes
SELECT DISTINCT ON (coalesce(shown.word, k.lexeme)) coalesce(shown.word, k.lexeme) AS word, k.rank
FROM unnest({lexemes}) WITH ORDINALITY AS k(lexeme, rank)
LEFT JOIN (
    -- plain words first, a word of this lexeme alone before one of several (``error``, ``not_found_error``);
    -- a compound (``per-tenant``, ``ray.init``) only for a lexeme no plain word gives
    SELECT DISTINCT ON (lex) lex, w.word
    FROM (
        -- each distinct word stemmed once (OFFSET 0 keeps the stems a column: else stemmed at each use)
        SELECT w.word, w.compound, w.pos, tsvector_to_array(to_tsvector({config}, w.word)) AS lexemes
        FROM (
            SELECT word, 0 AS compound, min(pos) AS pos
            FROM regexp_split_to_table(lower(CAST(:content AS text)), '[^[:alnum:]_]+') WITH ORDINALITY AS x(word, pos)
            WHERE word <> ''
            GROUP BY word
            UNION ALL
            SELECT x.match[1], 1, min(x.pos)
            FROM regexp_matches(lower(CAST(:content AS text)), '([[:alnum:]_]+(?:[.-]+[[:alnum:]_]+)+)', 'g')
                 WITH ORDINALITY AS x(match, pos)
            WHERE array_to_string({lexemes}, ' ') ~ '[.-]'  -- else no compound is needed
            GROUP BY x.match[1]
        ) w
        OFFSET 0
    ) w
    -- only the few words whose stems meet the lexemes are unnested
    CROSS JOIN LATERAL unnest(w.lexemes) AS lex
    WHERE w.lexemes && {lexemes} AND lex = ANY({lexemes})
    ORDER BY lex, w.compound, cardinality(w.lexemes) > 1, w.pos
) shown ON shown.lex = k.lexeme
ORDER BY coalesce(shown.word, k.lexeme), k.rank
) d"""

# The collection's size and length, each one scalar subquery (evaluated once per statement: as a joined
# aggregate it was re-read for every term)
_COLLECTION_SIZE = (
    "(SELECT coalesce(max(s.{column}), 0) FROM collection_stats s WHERE s.collection = CAST(:collection AS varchar))"
)
# df by a correlated lookup, not a join: a join may be planned as a hash join over all of lexeme_stats (it did
# in a fresh database: 170 ms per chunk); the subquery always probes the primary key. It is a column of the
# terms (whose window keeps them a subquery of their own): as the statistics' df it ran twice per term, once
# for each use in the idf
_STORED_DF = (
    "(SELECT f.doc_freq FROM lexeme_stats f WHERE f.collection = CAST(:collection AS varchar) "
    "AND f.lexeme = u.lexeme) AS stored_df, "
)

# A jsonb array of the chunk text's keywords. ``:self_count`` is 1 when the chunk is not yet in the
# statistics (it is being inserted) and 0 when it is (a backfill).
KEYWORDS_SQL = (
    """(
WITH kw_top AS (
    SELECT t.lexeme,
           """  # noqa: S608 (constants of this module only)
    + KEYWORD_SCORE_SQL
    + """ AS score
    FROM (
        """
    + KEYWORD_TERMS_SQL.format(key=_STORED_DF, window="", source="", text=":content")
    + """
    ) t
    """
    + KEYWORD_STATISTICS_SQL.format(
        count=_COLLECTION_SIZE.format(column="chunk_count"),
        total=_COLLECTION_SIZE.format(column="total_length"),
        df="t.stored_df",
    )
    + """
    ORDER BY score DESC, t.lexeme
    LIMIT :keyword_count
),
kw AS (
    SELECT array_agg(lexeme ORDER BY score DESC, lexeme) AS lexemes, CAST(:fts_config AS regconfig) AS config
    FROM kw_top
)
SELECT ("""
    + KEYWORDS_SHOWN_SQL.format(lexemes="kw.lexemes", config="kw.config")
    + """)
FROM kw
)"""
)

# statements composed of the constant above only; every value is a bound parameter
_BACKFILL_SQL = (
    "UPDATE document_chunks c SET metadata = c.metadata || jsonb_build_object('keywords', "  # noqa: S608
    + KEYWORDS_SQL.replace(":content", "c.content")
    + ") WHERE c.id = :chunk_id AND c.collection = :collection"  # the collection: one shard on Citus
)
_BACKFILL = text(_BACKFILL_SQL)
_PREVIEW_SQL = "SELECT " + KEYWORDS_SQL
_PREVIEW = text(_PREVIEW_SQL)

_CONTENTS = text("SELECT id, content FROM document_chunks WHERE collection = :collection AND id = ANY(:ids)")
_SET_KEYWORDS = text(
    "UPDATE document_chunks SET metadata = metadata || jsonb_build_object('keywords', CAST(:keywords AS jsonb)) "
    "WHERE id = :chunk_id AND collection = :collection"
)
_CLEAR = text(
    "UPDATE document_chunks SET metadata = metadata - 'keywords' "
    "WHERE id = :chunk_id AND collection = :collection AND metadata ? 'keywords'"
)


def backfill_keywords(
    session: Session,
    chunk_ids: list[int],
    *,
    collection: str,
    fts_config: str,
    keyword_count: int,
    bm25_k1: float,
    bm25_b: float,
) -> None:
    """Recompute ``metadata.keywords`` of these chunks of ``collection`` against its current statistics.

    ``keyword_count`` 0 removes them. The tsvector is not touched, so the BM25 postings stay as they are.
    """
    if not chunk_ids:
        return
    if keyword_count <= 0:
        session.execute(_CLEAR, [{"chunk_id": i, "collection": collection} for i in chunk_ids])
        return
    values = {
        "fts_config": fts_config,
        "collection": collection,
        "self_count": 0,
        "bm25_k1": float(bm25_k1),
        "bm25_b": float(bm25_b),
        "keyword_count": keyword_count,
    }
    if not has_citus(session.connection()):
        session.execute(_BACKFILL, [{**values, "chunk_id": i} for i in chunk_ids])
        return
    # Citus plans the UPDATE with its correlated statistics subquery as multi-shard, and refuses it ("CTEs that
    # refer to other subqueries are not supported in multi-shard queries"): each chunk's keywords are read by
    # a router SELECT, as an ingest computes them, then written by a plain single-shard UPDATE
    contents = session.execute(_CONTENTS, {"collection": collection, "ids": list(chunk_ids)}).all()
    for chunk_id, content in contents:
        keywords = session.execute(_PREVIEW, {**values, "content": content}).scalar_one()
        params = {"chunk_id": chunk_id, "collection": collection, "keywords": json.dumps(list(keywords or []))}
        session.execute(_SET_KEYWORDS, params)


def keywords_of(
    session: Session,
    content: str,
    *,
    collection: str,
    fts_config: str,
    keyword_count: int,
    bm25_k1: float,
    bm25_b: float,
) -> list[str]:
    """The keywords ``content`` would get as a new chunk of ``collection`` (for tests and inspection)."""
    row = session.execute(
        _PREVIEW,
        {
            "content": content,
            "fts_config": fts_config,
            "collection": collection,
            "self_count": 1,
            "bm25_k1": float(bm25_k1),
            "bm25_b": float(bm25_b),
            "keyword_count": keyword_count,
        },
    ).scalar_one()
    return list(row or [])
