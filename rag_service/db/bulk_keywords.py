"""A bulk load's keywords (``db.bulk``): each staged chunk's, as the row path computes them at write time.

Chunk k is weighed against the statistics of the chunks staged before it (``bulk_before``: their count and
length; ``bulk_df``: how many of them hold each lexeme), itself counted in by ``:self_count`` = 1 as in
``db.keywords``, whose expressions these statements use. Two steps: the best lexemes of every chunk in one
set-based statement (``bulk_best_lexemes``: seq, lexemes in order), then the words shown for them, chunk by
chunk (``bulk_keywords``: seq, keywords), which the load's INSERT joins; with keywords off it is empty.

Set-based, the statistics are joined once (a hash join) instead of probed 72 times a chunk: the keywords of
1M chunks took 104 s of statistics + 563 s chunk by chunk, now 74 + 156 + 120 s (docs/benchmarks.md,
"Session 32"). Where the staging is unlogged (``Staging.schema``), both run on PostgreSQL's parallel workers
through functions of the load's schema marked ``PARALLEL SAFE``: the chunks' terms (inline, a window gives each
its length, and windows keep a statement in the leader) and the words shown (inline, their correlated subquery
stays in the leader). Temporary staging tables are invisible to workers: there both run in one process.

Where the database has the ``rag_bm25`` extension (``ext/rag_bm25``), the statistics and the best lexemes are one
pass of its window function ``rag_bulk_best_lexemes`` over the chunks in load order, the statistics kept running in
a hash table, the texts tokenized on the workers below it: 73 s at 1M chunks against 95 + 199 s for the set-based
statements, the same lexemes for all 1M (docs/benchmarks.md, "Session 38").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from psycopg.sql import SQL, Identifier
from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.db.bulk_staging import StagedTable, Staging, staged_table
from rag_service.db.contexts import TSV_LENGTH
from rag_service.db.documents import ChunkKeywords
from rag_service.db.keywords import (
    KEYWORD_SCORE_SQL,
    KEYWORD_STATISTICS_SQL,
    KEYWORD_TERMS_SQL,
    KEYWORDS_SHOWN_SQL,
)
from rag_service.db.packed_postings import unavailable_reason

_KEYWORD_BEFORE_SELECT = (
    "SELECT v.seq, row_number() OVER w - 1 AS chunk_count, "  # noqa: S608 (constants of this module only)
    "coalesce(sum(v.len) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS total_length "
    "FROM (SELECT v.seq, " + TSV_LENGTH.format(tsv="v.tsv") + " AS len FROM bulk_vectors v) v "
    "WINDOW w AS (ORDER BY v.seq)"
)
_KEYWORD_BEFORE_KEY = text("ALTER TABLE bulk_before ADD PRIMARY KEY (seq)")
# every chunk's best lexemes, ranked as the row path's kw_top ranks them (its statistics c and d per chunk), from
# ``terms``: (seq, lexeme, tf, len) of every staged chunk
_BEST_LEXEMES_SQL = (
    "SELECT seq, array_agg(lexeme ORDER BY rank) AS lexemes FROM ("  # noqa: S608 (constants only)
    "SELECT t.seq, t.lexeme, row_number() OVER (PARTITION BY t.seq ORDER BY "
    + KEYWORD_SCORE_SQL
    + " DESC, t.lexeme) AS rank FROM ({terms}) t JOIN bulk_before s ON s.seq = t.seq "
    "LEFT JOIN bulk_df f ON f.seq = t.seq AND f.lexeme = t.lexeme "
    + KEYWORD_STATISTICS_SQL.format(count="s.chunk_count", total="s.total_length", df="f.doc_freq")
    + ") ranked WHERE rank <= :keyword_count GROUP BY seq"
)
# the terms inline: a window gives each chunk its length, so the join and ranking run in one process
_BEST_LEXEMES_SELECT = _BEST_LEXEMES_SQL.replace(
    "{terms}",
    KEYWORD_TERMS_SQL.format(key="b.seq, ", window="PARTITION BY b.seq", source="bulk_chunks b, ", text="b.content"),
)
# the terms of one text by a function of the load's schema: no window before the join, so the whole statement
# runs on the workers (a window never does) but the ranking; 169.7 against 294.6 s at 1M (benchmarks "Session 32")
_CREATE_TERMS_FUNCTION = (
    "CREATE FUNCTION {}.bulk_keyword_terms(content text, config regconfig) "
    "RETURNS TABLE(lexeme text, tf double precision, len double precision) "
    "LANGUAGE plpgsql STABLE PARALLEL SAFE ROWS 60 AS $rag_terms$ BEGIN RETURN QUERY "
    + KEYWORD_TERMS_SQL.format(key="", window="", source="", text="content").replace(
        "CAST(:fts_config AS regconfig)", "config"
    )
    + "; END $rag_terms$"
)
_BEST_LEXEMES_BY_FUNCTION_SELECT = _BEST_LEXEMES_SQL.replace(
    "{terms}",
    "SELECT b.seq, k.lexeme, k.tf, k.len FROM bulk_chunks b "
    "CROSS JOIN LATERAL bulk_keyword_terms(b.content, CAST(:fts_config AS regconfig)) AS k",
)
# the configuration's parser is the default one and it has no thesaurus: then only a tag opened in a chunk's search
# prefix can take a word of its text across the newline between them
_PARSER_KEEPS_TEXT_APART = (
    "(SELECT p.prsname = 'default' AND p.prsnamespace = 'pg_catalog'::regnamespace AND NOT EXISTS ("
    "SELECT 1 FROM pg_ts_config_map m JOIN pg_ts_dict d ON d.oid = m.mapdict "
    "JOIN pg_ts_template t ON t.oid = d.dicttemplate WHERE m.mapcfg = c.oid AND t.tmplname = 'thesaurus') "
    "FROM pg_ts_config c JOIN pg_ts_parser p ON p.oid = c.cfgparser WHERE c.oid = CAST(:fts_config AS regconfig))"
)
#: a staged chunk's text as its own tsvector (what the row path weighs its keywords from)
_TEXT_VECTOR = "to_tsvector(CAST(:fts_config AS regconfig), rag_keyword_text(b.content))"
_KEYWORD_TERMS_SELECT = (
    "SELECT v.seq, u.lexeme, row_number() OVER (PARTITION BY u.lexeme ORDER BY v.seq) - 1 AS doc_freq "
    "FROM bulk_vectors v, unnest(v.tsv) AS u"
)
# a text's terms missing from its own stored vector (a tag opened in the prefix took them, or a configuration not
# reasoned about): bulk_df has no row for them, and the row path weighs them with the chunks before that hold them.
# Not probed: a text's first token, which the parser may read apart from the prefix ("~AlgorithmConfig.x" opening a
# text is a file token, a host token after a newline); it is weighed as if no chunk before held it, which differs
# from the row path only if an earlier chunk's prefix opens with that very token (the one pass weighs it right)
_MISSING_TERMS_SELECT = (
    "SELECT b.seq, u.lexeme FROM bulk_chunks b JOIN bulk_vectors v ON v.seq = b.seq, "  # noqa: S608 (constants only)
    "unnest(" + _TEXT_VECTOR + ") AS u "
    "WHERE (strpos(b.search_prefix, '<') > 0 OR NOT " + _PARSER_KEEPS_TEXT_APART + ") "
    "AND u.lexeme <> ALL (tsvector_to_array(v.tsv))"
)
_COUNT_MISSING = text("SELECT count(*) FROM bulk_missing_terms")
_ADD_MISSING = text(
    "INSERT INTO bulk_df (seq, lexeme, doc_freq) SELECT m.seq, m.lexeme, count(f.seq) FROM bulk_missing_terms m "
    "LEFT JOIN bulk_df f ON f.lexeme = m.lexeme AND f.seq < m.seq GROUP BY m.seq, m.lexeme"
)
# the extension's pass: each chunk's stored tsvector (what the statistics count) and its text's (what its keywords
# weigh, tokenized again as the row path does), the text's computed below the window (OFFSET 0 keeps it there)
_BEST_LEXEMES_IN_ONE_PASS_SQL = (
    "SELECT seq, lexemes FROM (SELECT t.seq, rag_bulk_best_lexemes(t.tsv, t.text_vector, "
    "CAST(:bm25_k1 AS float8), CAST(:bm25_b AS float8), CAST(:keyword_count AS int4)) "
    "OVER (ORDER BY t.seq) AS lexemes "
    "FROM (SELECT v.seq, v.tsv, {text_vector} AS text_vector "
    "FROM bulk_vectors v JOIN bulk_chunks b ON b.seq = v.seq OFFSET 0) t) ranked WHERE lexemes IS NOT NULL"
)
# the planner prices to_tsvector at 100 operators and plans the texts' tokenizing in the leader (127 s at 1M);
# priced at its weight through a function of the load's schema it runs on the workers: 73 s
_CREATE_TEXT_VECTOR_FUNCTION = (
    "CREATE FUNCTION {}.bulk_text_vector(content text, config regconfig) RETURNS tsvector "
    "LANGUAGE plpgsql STABLE PARALLEL SAFE COST 10000 AS $rag_text$ "
    "BEGIN RETURN to_tsvector(config, rag_keyword_text(content)); END $rag_text$"
)
_BEST_LEXEMES_IN_ONE_PASS_SELECT = _BEST_LEXEMES_IN_ONE_PASS_SQL.format(text_vector=_TEXT_VECTOR)
_BEST_LEXEMES_IN_ONE_PASS_BY_FUNCTION_SELECT = _BEST_LEXEMES_IN_ONE_PASS_SQL.format(
    text_vector="bulk_text_vector(b.content, CAST(:fts_config AS regconfig))"
)
_BEST_LEXEMES_KEY = text("ALTER TABLE bulk_best_lexemes ADD PRIMARY KEY (seq)")
_BEST_JOINED = "FROM bulk_chunks b LEFT JOIN bulk_best_lexemes t ON t.seq = b.seq"
# each chunk's keywords, inline (temporary staging: serial) or through the function below (unlogged: parallel)
_KEYWORDS_SELECT = (
    "SELECT b.seq, ("
    + KEYWORDS_SHOWN_SQL.format(lexemes="t.lexemes", config="CAST(:fts_config AS regconfig)").replace(
        ":content", "b.content"
    )
    + ") AS keywords "
    + _BEST_JOINED
)
# the same as a function of (content, lexemes, config): the config is cast once a chunk, not once a word
_FUNCTION_BODY = KEYWORDS_SHOWN_SQL.format(lexemes="$2", config="$3").replace(":content", "$1")
assert not re.search(r"(?<![\w:\[]):[a-z_0-9]+", _FUNCTION_BODY), "db.keywords has a parameter the function lacks"
_CREATE_FUNCTION = (
    "CREATE FUNCTION {}.bulk_chunk_keywords(text, text[], regconfig) "
    "RETURNS jsonb LANGUAGE sql STABLE PARALLEL SAFE AS $rag_keywords$ " + _FUNCTION_BODY + " $rag_keywords$"
)
_KEYWORDS_BY_FUNCTION_SELECT = (
    "SELECT b.seq, bulk_chunk_keywords(b.content, t.lexemes, CAST(:fts_config AS regconfig)) AS keywords "
    + _BEST_JOINED
)
_NO_KEYWORDS_SELECT = "SELECT seq, CAST(NULL AS jsonb) AS keywords FROM bulk_chunks WHERE false"
_DF, _BEFORE = staged_table("bulk_df", _KEYWORD_TERMS_SELECT), staged_table("bulk_before", _KEYWORD_BEFORE_SELECT)
_MISSING = staged_table("bulk_missing_terms", _MISSING_TERMS_SELECT)
_BEST_LEXEMES = staged_table("bulk_best_lexemes", _BEST_LEXEMES_SELECT)
_BEST_LEXEMES_BY_FUNCTION = staged_table("bulk_best_lexemes", _BEST_LEXEMES_BY_FUNCTION_SELECT)
_BEST_LEXEMES_IN_ONE_PASS = staged_table("bulk_best_lexemes", _BEST_LEXEMES_IN_ONE_PASS_SELECT)
_BEST_LEXEMES_IN_ONE_PASS_BY_FUNCTION = staged_table("bulk_best_lexemes", _BEST_LEXEMES_IN_ONE_PASS_BY_FUNCTION_SELECT)
_KEYWORDS = staged_table("bulk_keywords", _KEYWORDS_SELECT)
_KEYWORDS_BY_FUNCTION = staged_table("bulk_keywords", _KEYWORDS_BY_FUNCTION_SELECT)
_NO_KEYWORDS = staged_table("bulk_keywords", _NO_KEYWORDS_SELECT)
_KEYWORDS_KEY = text("ALTER TABLE bulk_keywords ADD PRIMARY KEY (seq)")
#: memory for the set-based statement's hash join and sorts (tens of millions of terms at 1M chunks)
BEST_LEXEMES_WORK_MEM = "256MB"
# inside a load's transaction the functions' queries were planned again at every call (custom plans: 400
# against 240 us a chunk on one process, docs/benchmarks.md "Session 32"); one generic plan serves every chunk
_FUNCTION_PLAN = {"plan_cache_mode": "force_generic_plan"}


def one_pass_available(session: Session) -> bool:
    """The best lexemes can take the extension's one pass: ``rag_bm25`` is in this database (created here if the
    server has it). Call it before the staging schema leads the ``search_path``: the extension goes in its first
    schema."""
    return unavailable_reason(session) is None


def stage_keywords(
    staging: Staging,
    params: dict[str, Any],
    keywords: ChunkKeywords,
    phase: Callable[[str], None],
    *,
    chunks: int,
    one_pass: bool = False,
) -> dict[str, float]:
    """Write ``bulk_keywords`` for the staged chunks (tokenized: ``Staging.tokenize``); returns seconds by phase.

    ``one_pass``: the best lexemes by the extension's window function (``one_pass_available``)."""
    session = staging.session
    timings: dict[str, float] = {}
    if keywords.count <= 0 or not chunks:
        staging.create_as(_NO_KEYWORDS, params)
        session.execute(_KEYWORDS_KEY)
        return timings
    weights = {"self_count": 1, "keyword_count": keywords.count}
    keyword_params = {**params, **weights, "bm25_k1": float(keywords.bm25_k1), "bm25_b": float(keywords.bm25_b)}
    if one_pass:
        phase("best lexemes")
        started = time.perf_counter()
        by_function = (_CREATE_TEXT_VECTOR_FUNCTION, _BEST_LEXEMES_IN_ONE_PASS_BY_FUNCTION)
        _stage_on_workers(staging, _BEST_LEXEMES_IN_ONE_PASS, by_function, keyword_params)
    else:
        timings["keyword statistics"] = _count_statistics(staging, params, phase)
        phase("best lexemes")
        started = time.perf_counter()
        _rank_set_based(staging, keyword_params)
    session.execute(_BEST_LEXEMES_KEY)
    session.execute(text("ANALYZE bulk_best_lexemes"))
    timings["best lexemes"] = time.perf_counter() - started
    phase("keywords")
    started = time.perf_counter()
    _stage_on_workers(staging, _KEYWORDS, (_CREATE_FUNCTION, _KEYWORDS_BY_FUNCTION), params, _FUNCTION_PLAN)
    session.execute(_KEYWORDS_KEY)
    timings["keywords"] = time.perf_counter() - started
    return timings


def _count_statistics(staging: Staging, params: dict[str, Any], phase: Callable[[str], None]) -> float:
    """``bulk_df`` and ``bulk_before``, the statistics each chunk is weighed against; returns the seconds."""
    session = staging.session
    phase("keyword statistics")
    started = time.perf_counter()
    staging.create_as(_DF, params)
    staging.create_as(_MISSING, params)
    if session.execute(_COUNT_MISSING).scalar_one():
        session.execute(_ADD_MISSING)
    staging.create_as(_BEFORE, params)
    session.execute(_KEYWORD_BEFORE_KEY)
    session.execute(text("ANALYZE bulk_df, bulk_before"))
    return time.perf_counter() - started


def _rank_set_based(staging: Staging, keyword_params: dict[str, Any]) -> None:
    """``bulk_best_lexemes`` by the set-based statement (on parallel workers where the staging allows them)."""
    settings = {"work_mem": BEST_LEXEMES_WORK_MEM, **_FUNCTION_PLAN}
    by_function = (_CREATE_TERMS_FUNCTION, _BEST_LEXEMES_BY_FUNCTION)
    _stage_on_workers(staging, _BEST_LEXEMES, by_function, keyword_params, settings)


def _stage_on_workers(
    staging: Staging,
    inline: StagedTable,
    by_function: tuple[str, StagedTable],
    params: dict[str, Any],
    settings: dict[str, str] | None = None,
) -> None:
    """Stage a table: ``inline`` where the staging is temporary (invisible to workers: one process), else through a
    function of the load's schema (``by_function``: its CREATE, for ``str.format`` with the schema, and the query
    that calls it) on the parallel workers; ``settings`` hold for the query either way."""
    if staging.schema is None:
        staging.create_as(inline, params, settings=settings)
    else:
        create_function, query = by_function
        staging.run(SQL(create_function).format(Identifier(staging.schema)))
        staging.create_as(query, params, parallel=True, settings=settings)
