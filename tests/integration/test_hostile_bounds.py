"""A query's work is bounded by construction: whatever its text, few lexemes and tsquery nodes reach SQL.

What PostgreSQL makes of the query decides the SQL's cost: each lexeme of the BM25 text is a postings
list read, each node of the required tsquery (phrases, ``-exclusions``) is matched on every candidate
chunk. Counted by PostgreSQL itself (``to_tsvector``, ``numnode``), for every variant of 20,000-character
hostile queries; the counts do not depend on the machine, so the test has no clock.
"""

from __future__ import annotations

import random
import string

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection

from rag_service.db.database import Database
from rag_service.db.search import SearchRequest, explain
from rag_service.retrieve.query import (
    MAX_PHRASE_PARTS,
    MAX_QUERY_FILTERS,
    MAX_QUERY_WORDS,
    MAX_WORD_PARTS,
    bm25_text,
    bounds_note,
    parse_query,
    validate_query,
    websearch_parts,
)
from rag_service.retrieve.variants import expand_query

#: PostgreSQL's parser may add a token per compound (``a-b`` is ``a-b``, ``a`` and ``b``): twice the
#: letter-and-digit runs the parse keeps, plus one per term
WORD_LEXEMES = 2 * MAX_QUERY_WORDS * MAX_WORD_PARTS + MAX_QUERY_WORDS
FILTER_LEXEMES = 2 * MAX_QUERY_FILTERS * MAX_PHRASE_PARTS + MAX_QUERY_FILTERS


def _printable(seed: int, length: int = 20_000) -> str:
    """The generator of issue 23: printable ASCII plus RTL, emoji and CJK characters."""
    rng = random.Random(seed)
    alphabet = string.printable + "مرحبا שלום 😀🚀 漢字テスト 中文"
    return "".join(rng.choice(alphabet) for _ in range(length))


def _joined(seed: int, length: int = 20_000) -> str:
    """Long words of punctuation-joined parts: one 'word' to the query parser, hundreds of lexemes to PostgreSQL."""
    rng = random.Random(seed)
    words = [".".join(f"p{rng.randrange(10**6)}-{rng.randrange(10**6)}" for _ in range(200)) for _ in range(40)]
    phrases = [f'"{w.replace(".", " ")}"' for w in words[:10]] + [f"-{w}" for w in words[10:20]]
    return " ".join([*words, *phrases])[:length]


HOSTILE = [_printable(1), _printable(2), _joined(3), _joined(4), '"' + "a.b/c-d " * 3000 + '"']


def _count(connection: Connection, sql: str, value: str) -> int:
    return int(connection.execute(text(sql), {"v": value}).scalar_one() or 0)


@pytest.mark.parametrize("query", HOSTILE, ids=["printable-1", "printable-2", "joined-3", "joined-4", "phrase"])
def test_the_lexemes_and_tsquery_nodes_reaching_sql_are_capped(connection: Connection, query: str) -> None:
    for variant in expand_query(validate_query(query)):
        parsed = parse_query(variant)
        any_terms, required = websearch_parts(parsed)
        lexemes = _count(
            connection, "SELECT cardinality(tsvector_to_array(to_tsvector('english', :v)))", bm25_text(parsed)
        )
        assert lexemes <= WORD_LEXEMES + FILTER_LEXEMES, f"{lexemes} postings lists for one variant"
        any_nodes = _count(connection, "SELECT numnode(websearch_to_tsquery('english', :v))", any_terms)
        assert any_nodes <= 2 * WORD_LEXEMES, f"{any_nodes} tsquery nodes of the words"
        required_nodes = _count(connection, "SELECT numnode(websearch_to_tsquery('english', :v))", required)
        assert required_nodes <= 2 * FILTER_LEXEMES, f"{required_nodes} tsquery nodes of phrases and exclusions"


def test_an_ordinary_question_is_not_cut_and_a_cut_is_reported() -> None:
    question = 'How do I configure ray.data.Dataset.map_batches with "batch_size" for GPU-based inference?'
    assert bounds_note(parse_query(question)) is None
    assert "ray.data.Dataset.map_batches" in parse_query(question).words
    note = bounds_note(parse_query(_joined(5)))
    assert note is not None and "cut" in note and "letter-and-digit runs" in note


def test_the_required_tsquery_is_parsed_once_per_statement_not_per_posting(db: Database) -> None:
    """The BM25 arm's phrase/-exclusion filter: a regconfig cast is only stable, so an inline
    ``websearch_to_tsquery`` was re-parsed on every posting row (150 ms for one hostile query)."""
    parsed = parse_query('"' + "x.y/z-w " * 50 + '" -"p-q r.s" ' + _joined(6))
    any_terms, required = websearch_parts(parsed)
    request = SearchRequest(
        collection="hostile",
        query_vector=None,
        any_terms=any_terms,
        required_terms=required,
        vector_weight=0.0,
        keyword_weight=1.0,
        bm25_text=bm25_text(parsed),
    )
    with db.transaction() as session:
        plan = explain(session, request)
    filters = [line for line in plan.splitlines() if "content_tsv @@" in line]
    assert filters and all("websearch_to_tsquery" not in line for line in filters), plan
