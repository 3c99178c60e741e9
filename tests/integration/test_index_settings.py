"""The model/dimension guard refuses to mix vectors of different models."""

from __future__ import annotations

import numpy as np
import pytest

from rag_service.db.index_settings import check_index_settings, read_index_settings
from rag_service.errors import EmbeddingMismatchError
from tests.vector_rows import insert_vectors

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _written(session, dim: int = 384) -> None:
    """A chunk written with the recorded settings: from now on the database holds them."""
    insert_vectors(session, "default", np.ones((1, dim), dtype=np.float32))


def test_first_write_records_model(db):
    with db.transaction() as session:
        assert read_index_settings(session) is None
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
        stored = read_index_settings(session)
        assert stored is not None
        assert (stored.embedding_model, stored.embedding_dim, stored.fts_config) == (MODEL, 384, "english")


def test_other_model_is_refused(db):
    with db.transaction() as session:
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
        _written(session)
        with pytest.raises(EmbeddingMismatchError, match="holds vectors of 'sentence-transformers/all-MiniLM"):
            check_index_settings(session, model_id="other/model", dim=384, fts_config="english")


def test_other_dimension_is_refused_once_the_first_model_is_recorded(db):
    with db.transaction() as session:
        check_index_settings(session, model_id="bge-base", dim=768, fts_config="english", record=True)
        stored = read_index_settings(session)
        assert stored is not None and stored.embedding_dim == 768
        _written(session, 768)
        with pytest.raises(EmbeddingMismatchError, match="makes 384-d vectors but this database stores 768-d"):
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)


def test_a_read_before_the_first_write_checks_nothing(db):
    with db.transaction() as session:
        check_index_settings(session, model_id="bge-base", dim=768, fts_config="english")
        assert read_index_settings(session) is None


def test_other_fts_config_is_refused(db):
    with db.transaction() as session:
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
        _written(session)
        with pytest.raises(EmbeddingMismatchError, match="RAG_FTS_CONFIG is 'simple'"):
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="simple")


def test_a_missing_fts_config_is_refused_in_one_line_before_it_is_recorded(db):
    """Audit 54a (5): RAG_FTS_CONFIG=deutsch was recorded at the first write, which then failed; the database
    held no tsvector yet refused the corrected 'german' for good."""
    from rag_service.errors import ConfigurationError

    with db.transaction() as session:
        with pytest.raises(ConfigurationError) as refused:
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="deutsch", record=True)
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith("RAG_FTS_CONFIG ('deutsch') is no text-search configuration of this PostgreSQL")
        assert "set it to one of: " in message and "german" in message and "english" in message
        assert read_index_settings(session) is None, "nothing recorded"
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="german", record=True)
        stored = read_index_settings(session)
        assert stored is not None and stored.fts_config == "german"


def test_a_recorded_fts_config_the_server_lacks_is_replaced_by_the_next_write(db):
    """A database an earlier version locked to a typo (no tsvector can have been made with it) heals; a recorded
    config that exists is still refused."""
    from sqlalchemy import text

    with db.transaction() as session:
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
        _written(session)
        session.execute(text("UPDATE index_settings SET fts_config = 'deutsch' WHERE id = 1"))
        session.expire_all()
        with pytest.raises(EmbeddingMismatchError, match="use text-search config 'deutsch'"):
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="german")  # a read changes nothing
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="german", record=True)
        stored = read_index_settings(session)
        assert stored is not None and stored.fts_config == "german"
        with pytest.raises(EmbeddingMismatchError, match="use text-search config 'german'"):
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)


def test_a_first_write_that_stored_nothing_locks_no_model(db):
    """A first `rag reindex` whose files all failed (or that was stopped before its first commit) recorded its model:
    every later read and write with another model was refused ("this database holds vectors of ...") though the
    database held none. The next write records its own settings, and a read refuses nothing."""
    with db.transaction() as session:
        check_index_settings(session, model_id="test/hashing-embedder", dim=256, fts_config="simple", record=True)
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english")  # a read: nothing to mix with
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
        stored = read_index_settings(session)
        assert stored is not None
        assert (stored.embedding_model, stored.embedding_dim, stored.fts_config) == (MODEL, 384, "english")
        _written(session)
        with pytest.raises(EmbeddingMismatchError, match="holds vectors of 'sentence-transformers/all-MiniLM"):
            check_index_settings(session, model_id="test/hashing-embedder", dim=384, fts_config="english", record=True)


def test_a_first_write_still_running_keeps_its_record(fresh_database):
    """Another run that recorded its model and has not written its first rows yet (it is embedding) holds its
    collection's lock: its record stays, and a write with another model is refused as before."""
    from rag_service.db.locks import reindex_lock

    database = fresh_database
    with database.transaction() as session:
        check_index_settings(session, model_id="test/hashing-embedder", dim=384, fts_config="english", record=True)
    theirs, mine = reindex_lock(database.engine, "theirs"), reindex_lock(database.engine, "mine")
    refused = pytest.raises(EmbeddingMismatchError, match="holds vectors of")
    with theirs, mine, database.transaction() as session, refused:
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
    with reindex_lock(database.engine, "mine"), database.transaction() as session:
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)  # theirs ended
        stored = read_index_settings(session)
        assert stored is not None and stored.embedding_model == MODEL
