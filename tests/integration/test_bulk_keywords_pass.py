"""The rag_bm25 extension's one pass gives a bulk load's chunks the row path's keywords, as the set-based SQL does.

The pass counts the statistics from each chunk's stored tsvector (search prefix and text) and weighs the terms of
its text's own tsvector; the texts here are where the two differ (a tag opened in the prefix, a text whose first
token the parser reads apart from the prefix, a lexeme past 255 positions, words past position 16383, a prefix
ending in a stopword) or where the C code could slip (non-ASCII letters, digits, ties broken by collation, a
chunk without terms). Each text is one chunk written
by the row path (the prefix its document's title), then the same chunks are staged and ranked both bulk ways:
each chunk's words shown must be the row path's, and the two bulk ways must rank the same lexemes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from rag_service.db.bulk_keywords import one_pass_available, stage_keywords
from rag_service.db.bulk_staging import Staging
from rag_service.db.chunk_text import search_prefix
from rag_service.db.documents import ChunkKeywords, ChunkRow, replace_document
from rag_service.db.engine import make_engine
from tests.integration.test_packed_postings import IN_CI

_COMMON = "the service indexes documents with postgres and pgvector for retrieval"
TEXTS = [
    ("Install", "Install the service with pip. " + _COMMON),
    ("Install and the", "install the service, then the database " + _COMMON),  # prefix ends in stopwords
    ("Param", "param values and param types " + _COMMON),  # an earlier chunk holds "param"
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
    ("Api", "~AlgorithmConfig.callbacks\n    ~AlgorithmConfig.debugging " + _COMMON),  # a text's start parsed apart
]


def _row_path(engine: Engine, fts_config: str) -> list[str]:
    """Each text's keywords as the row path writes them: one document a text, in order, its prefix the title."""
    with Session(engine) as session, session.begin():
        for seq, (prefix, content) in enumerate(TEXTS):
            chunk = ChunkRow(0, "text", content, 0, len(content), 1, f"h{seq}", np.full(384, 0.1, dtype=np.float32))
            replace_document(
                session,
                collection="keywords-" + fts_config,
                source=f"t{seq}",
                title=prefix,
                content=content,
                content_hash=f"h{seq}",
                chunker="test",
                fts_config=fts_config,
                chunks=[chunk],
                keywords=ChunkKeywords(count=8),
            )
        found = session.execute(
            text(
                "SELECT coalesce(c.metadata -> 'keywords', '[]'::jsonb)::text FROM document_chunks c "
                "JOIN documents d ON d.id = c.document_id WHERE d.collection = :c ORDER BY d.id"
            ),
            {"c": "keywords-" + fts_config},
        )
        keywords = list(found.scalars())
        session.rollback()
    return keywords


def _bulk(engine: Engine, fts_config: str, *, one_pass: bool) -> list[tuple[Any, ...]]:
    """(lexemes, words shown) of each text staged as a bulk load stages it, ranked one way or the other."""
    params = {"collection": "kb", "fts_config": fts_config}
    with Session(engine) as session, session.begin():
        if one_pass and not one_pass_available(session):
            message = "the server has no rag_bm25 extension 0.3 (make install builds it)"
            pytest.fail(message, pytrace=False) if IN_CI else pytest.skip(message)
        staging = Staging(session)
        staging.create()
        rows = [
            {"seq": seq, "content": content, "prefix": search_prefix(prefix, "")}
            for seq, (prefix, content) in enumerate(TEXTS)
        ]
        session.execute(
            text(
                "INSERT INTO bulk_chunks (seq, document_id, chunk_index, content, search_prefix, metadata) "
                "VALUES (:seq, :seq, 0, :content, :prefix, '{}'::jsonb)"
            ),
            rows,
        )
        staging.tokenize(fts_config)
        stage_keywords(staging, params, ChunkKeywords(count=8), lambda _: None, chunks=len(TEXTS), one_pass=one_pass)
        found = session.execute(
            text(
                "SELECT l.lexemes, k.keywords::text FROM bulk_chunks b LEFT JOIN bulk_best_lexemes l ON l.seq = b.seq "
                "LEFT JOIN bulk_keywords k ON k.seq = b.seq ORDER BY b.seq"
            )
        ).all()
        session.rollback()
    return [tuple(row) for row in found]


@pytest.mark.parametrize("fts_config", ["english", "simple"])
def test_the_extensions_pass_gives_the_row_paths_keywords(engine, fts_config):
    row_path = _row_path(engine, fts_config)
    one_pass = _bulk(engine, fts_config, one_pass=True)
    set_based = _bulk(engine, fts_config, one_pass=False)
    assert [shown for _, shown in one_pass] == row_path
    assert one_pass == set_based
    lexemes = [best for best, _ in one_pass]
    assert sum(best is not None for best in lexemes) == len(TEXTS) - 1 - (fts_config == "english")
    assert lexemes[12] is None and "param" in lexemes[3]
    if fts_config == "english":  # the text's counts rank them, not the stored vector's less the prefix's
        assert lexemes[5][:2] == ["aardvark", "zebra"] and lexemes[6] == ["zeta", "yak"]
    assert lexemes[9] == sorted(lexemes[9])  # equal scores: the lexemes in collation order


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
