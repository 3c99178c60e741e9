"""A bulk load's keywords (``db.bulk``): each staged chunk's, as the row path computes them at write time.

Chunk k is weighed against the statistics of the chunks staged before it (``bulk_before``: their count and
length; ``bulk_df``: how many of them hold each lexeme), itself counted in by ``:self_count`` = 1 as in
``db.keywords``, whose statement this is. The keywords go to ``bulk_keywords`` (seq, keywords), which the
load's INSERT joins; with keywords off it is empty.

Where the staging is unlogged (``Staging.schema``), the statement is a SQL function of the load's schema, marked
``PARALLEL SAFE``, called once per chunk by a query the parallel workers share: inline, its CTEs are
parallel-restricted and kept it in the leader alone. The same keywords, on 2 cores: 30k chunks 23.6 -> 17.0-19.2 s,
1M chunks 646 -> 563 s (the statistics lookups of 72 lexemes a chunk in a 60M-row ``bulk_df`` bound it there;
docs/benchmarks.md, "Session 31"). Temporary staging tables are invisible to workers: there it runs inline.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from typing import Any

from psycopg.sql import SQL, Identifier
from sqlalchemy import text

from rag_service.db.bulk_staging import Staging, staged_table
from rag_service.db.contexts import TSV_LENGTH
from rag_service.db.documents import ChunkKeywords
from rag_service.db.keywords import KEYWORDS_SQL

_KEYWORD_TERMS_SELECT = (
    "SELECT v.seq, u.lexeme, row_number() OVER (PARTITION BY u.lexeme ORDER BY v.seq) - 1 AS doc_freq "
    "FROM bulk_vectors v, unnest(v.tsv) AS u"
)
_KEYWORD_TERMS_KEY = text("ALTER TABLE bulk_df ADD PRIMARY KEY (seq, lexeme)")
_KEYWORD_BEFORE_SELECT = (
    "SELECT v.seq, row_number() OVER w - 1 AS chunk_count, "  # noqa: S608 (constants of this module only)
    "coalesce(sum(v.len) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS total_length "
    "FROM (SELECT v.seq, " + TSV_LENGTH.format(tsv="v.tsv") + " AS len FROM bulk_vectors v) v "
    "WINDOW w AS (ORDER BY v.seq)"
)
_KEYWORD_BEFORE_KEY = text("ALTER TABLE bulk_before ADD PRIMARY KEY (seq)")
_ROW_PATH_STATS = "FROM collection_stats s WHERE s.collection = CAST(:collection AS varchar)"
_ROW_PATH_DF = (
    "FROM lexeme_stats s\n" + " " * 34 + "WHERE s.collection = CAST(:collection AS varchar) AND s.lexeme = t.lexeme"
)
_BULK_KEYWORDS_SQL = (
    KEYWORDS_SQL.replace(":content", "b.content")
    .replace(_ROW_PATH_STATS, "FROM bulk_before s WHERE s.seq = b.seq")
    .replace(_ROW_PATH_DF, "FROM bulk_df s WHERE s.seq = b.seq AND s.lexeme = t.lexeme")
)
assert ":collection" not in _BULK_KEYWORDS_SQL, "db.keywords changed: update the replacements above"
# each chunk's keywords (``bulk_keywords``, joined by the INSERT: no UPDATE of the staged rows); none when
# keywords are off. Inline (temporary staging: serial) or through the function below (unlogged: parallel).
_KEYWORDS_SELECT = "SELECT b.seq, " + _BULK_KEYWORDS_SQL + " AS keywords FROM bulk_chunks b"  # noqa: S608
# the same statement as a function of (content, seq, fts_config, self_count, keyword_count, bm25_k1, bm25_b)
_FUNCTION_ARGUMENTS = {
    "b.content": "$1",
    "b.seq": "$2",
    ":fts_config": "$3",
    ":self_count": "$4",
    ":keyword_count": "$5",
    ":bm25_k1": "$6",
    ":bm25_b": "$7",
}
_FUNCTION_BODY = functools.reduce(
    lambda sql, name: sql.replace(name, _FUNCTION_ARGUMENTS[name]), _FUNCTION_ARGUMENTS, _BULK_KEYWORDS_SQL
)
assert not re.search(r"(?<![\w:\[]):[a-z_0-9]+", _FUNCTION_BODY), "db.keywords has a parameter the function lacks"
_CREATE_FUNCTION = (
    "CREATE FUNCTION {}.bulk_chunk_keywords(text, bigint, text, integer, integer, double precision, double precision) "
    "RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $rag_keywords$ SELECT " + _FUNCTION_BODY + " $rag_keywords$"
)
_KEYWORDS_BY_FUNCTION_SELECT = (
    "SELECT b.seq, bulk_chunk_keywords(b.content, b.seq, CAST(:fts_config AS text), CAST(:self_count AS integer), "
    "CAST(:keyword_count AS integer), CAST(:bm25_k1 AS double precision), CAST(:bm25_b AS double precision)) "
    "AS keywords FROM bulk_chunks b"
)
_NO_KEYWORDS_SELECT = "SELECT seq, CAST(NULL AS jsonb) AS keywords FROM bulk_chunks WHERE false"
_DF, _BEFORE = staged_table("bulk_df", _KEYWORD_TERMS_SELECT), staged_table("bulk_before", _KEYWORD_BEFORE_SELECT)
_KEYWORDS = staged_table("bulk_keywords", _KEYWORDS_SELECT)
_KEYWORDS_BY_FUNCTION = staged_table("bulk_keywords", _KEYWORDS_BY_FUNCTION_SELECT)
_NO_KEYWORDS = staged_table("bulk_keywords", _NO_KEYWORDS_SELECT)
_KEYWORDS_KEY = text("ALTER TABLE bulk_keywords ADD PRIMARY KEY (seq)")


def stage_keywords(
    staging: Staging, params: dict[str, Any], keywords: ChunkKeywords, phase: Callable[[str], None], *, chunks: int
) -> dict[str, float]:
    """Write ``bulk_keywords`` for the staged chunks (tokenized: ``Staging.tokenize``); returns seconds by phase."""
    session = staging.session
    timings: dict[str, float] = {}
    if keywords.count <= 0 or not chunks:
        staging.create_as(_NO_KEYWORDS, params)
        session.execute(_KEYWORDS_KEY)
        return timings
    phase("keyword statistics")
    started = time.perf_counter()
    staging.create_as(_DF, params)
    session.execute(_KEYWORD_TERMS_KEY)
    staging.create_as(_BEFORE, params)
    session.execute(_KEYWORD_BEFORE_KEY)
    session.execute(text("ANALYZE bulk_df, bulk_before"))
    timings["keyword statistics"] = time.perf_counter() - started
    phase("keywords")
    started = time.perf_counter()
    weights = {"self_count": 1, "keyword_count": keywords.count}
    keyword_params = {**params, **weights, "bm25_k1": float(keywords.bm25_k1), "bm25_b": float(keywords.bm25_b)}
    if staging.schema is None:
        staging.create_as(_KEYWORDS, keyword_params)
    else:
        staging.run(SQL(_CREATE_FUNCTION).format(Identifier(staging.schema)))
        staging.create_as(_KEYWORDS_BY_FUNCTION, keyword_params, parallel=True)
    session.execute(_KEYWORDS_KEY)
    timings["keywords"] = time.perf_counter() - started
    return timings
