"""The rag_bm25 extension's one pass ranks a bulk load's keywords exactly as the set-based statements do.

The pass counts a chunk's terms as its stored tsvector's (search prefix and text) less its prefix's; the texts
here are the cases where that shortcut must give way to tokenizing the text again (a tag opened in the prefix,
a lexeme past 255 positions, words past position 16383) or could slip (a prefix ending in a stopword,
non-ASCII letters, digits, ties broken by collation, a chunk without terms). Both ways run on the same staged
chunks and must give the same lexemes, in the same order, and the same words shown.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from rag_service.db.bulk_keywords import one_pass_available, stage_keywords
from rag_service.db.bulk_staging import Staging
from rag_service.db.documents import ChunkKeywords
from rag_service.db.engine import make_engine
from tests.integration.test_packed_postings import IN_CI

_COMMON = "the service indexes documents with postgres and pgvector for retrieval"
TEXTS = [
    ("Install", "Install the service with pip. " + _COMMON),
    ("Install and the", "install the service, then the database " + _COMMON),  # prefix ends in stopwords
    ("Generics <Type", "param> closes the tag the prefix opened: tag words here " + _COMMON),  # a tag over the newline
    ("List<T> of items", "generic list of items and their types " + _COMMON),
    ("Aardvark", "aardvark " * 300 + "zebra " * 300 + _COMMON),  # lexemes past 255 positions, one in the prefix
    ("A prefix of words shifts the text", "the " * 16_380 + "zeta " * 5 + "yak " * 3),  # positions past 16383
    ("Café", "café naïve straße données 東京 δεδομένα façade " + _COMMON),
    ("Ids", "abc123 a1b2c3 x9 12ab 2024 v2 ray.init per-tenant " + _COMMON),
    ("Ties", "alpha bravo charlie delta echo foxtrot golf hotel india juliet"),  # equal scores: collation order
    ("Ties", "Alpha BRAVO charlie Δelta écho"),
    ("Stopwords", "the and of a an to"),  # no term at all
    ("", ""),
    ("Dup", "Install the service with pip. " + _COMMON),  # the same text again: df counted
]


def _stage(session: Session, fts_config: str) -> Staging:
    staging = Staging(session)
    staging.create()
    rows = [
        {"seq": seq, "doc": 1 + seq // 4, "content": content, "prefix": prefix}
        for seq, (prefix, content) in enumerate(TEXTS)
    ]
    session.execute(
        text(
            "INSERT INTO bulk_chunks (seq, document_id, chunk_index, content, search_prefix, metadata) "
            "VALUES (:seq, :doc, :seq, :content, :prefix, '{}'::jsonb)"
        ),
        rows,
    )
    staging.tokenize(fts_config)
    return staging


def _keywords(engine: Engine, fts_config: str, *, one_pass: bool) -> list[tuple[Any, ...]]:
    params = {"collection": "kb", "fts_config": fts_config}
    with Session(engine) as session, session.begin():
        if one_pass and not one_pass_available(session):
            message = "the server has no rag_bm25 extension 0.3 (make install builds it)"
            pytest.fail(message, pytrace=False) if IN_CI else pytest.skip(message)
        staging = _stage(session, fts_config)
        stage_keywords(staging, params, ChunkKeywords(count=8), lambda _: None, chunks=len(TEXTS), one_pass=one_pass)
        found = session.execute(
            text(
                "SELECT b.seq, l.lexemes, k.keywords::text FROM bulk_chunks b "
                "LEFT JOIN bulk_best_lexemes l ON l.seq = b.seq LEFT JOIN bulk_keywords k ON k.seq = b.seq ORDER BY 1"
            )
        ).all()
        session.rollback()
    return [tuple(row) for row in found]


@pytest.mark.parametrize("fts_config", ["english", "simple"])
def test_the_extensions_pass_ranks_as_the_set_based_statements(engine, fts_config):
    set_based = _keywords(engine, fts_config, one_pass=False)
    one_pass = _keywords(engine, fts_config, one_pass=True)
    assert one_pass == set_based
    by_seq = {seq: lexemes for seq, lexemes, _ in set_based}
    assert sum(lexemes is not None for lexemes in by_seq.values()) == len(TEXTS) - 1 - (fts_config == "english")
    assert by_seq[11] is None and "param" in by_seq[2]
    if fts_config == "english":  # the text's counts rank them, not the stored vector's less the prefix's
        assert by_seq[4][:2] == ["aardvark", "zebra"] and by_seq[5] == ["zeta", "yak"]
    assert by_seq[8] == sorted(by_seq[8])  # equal scores: the lexemes in collation order


def test_a_database_holding_the_previous_version_is_updated_for_the_pass(database_factory, settings):
    engine = make_engine(database_factory.create("rag_ext"), settings)
    try:
        with engine.begin() as conn:
            if not conn.execute(text(_HAS_VERSION), {"version": "0.2"}).scalar_one():
                message = "the server has no rag_bm25 extension (make install builds it)"
                pytest.fail(message, pytrace=False) if IN_CI else pytest.skip(message)
            conn.execute(text("CREATE EXTENSION rag_bm25 VERSION '0.2'"))
        with Session(engine) as session, session.begin():
            assert one_pass_available(session)  # updated in place: ALTER EXTENSION ... UPDATE
            assert session.execute(text(_INSTALLED)).one() == ("0.3", 1)
    finally:
        engine.dispose()


_HAS_VERSION = "SELECT count(*) FROM pg_available_extension_versions WHERE name = 'rag_bm25' AND version = :version"
_INSTALLED = (
    "SELECT extversion, (SELECT count(*) FROM pg_proc WHERE proname = 'rag_bulk_best_lexemes' AND prokind = 'w') "
    "FROM pg_extension WHERE extname = 'rag_bm25'"
)
