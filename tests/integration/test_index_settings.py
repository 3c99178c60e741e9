"""The model/dimension guard refuses to mix vectors of different models."""

from __future__ import annotations

import pytest

from rag_service.db.index_settings import check_index_settings, read_index_settings
from rag_service.errors import EmbeddingMismatchError

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


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
        with pytest.raises(EmbeddingMismatchError, match="holds vectors of 'sentence-transformers/all-MiniLM"):
            check_index_settings(session, model_id="other/model", dim=384, fts_config="english")


def test_other_dimension_is_refused_once_the_first_model_is_recorded(db):
    with db.transaction() as session:
        check_index_settings(session, model_id="bge-base", dim=768, fts_config="english", record=True)
        stored = read_index_settings(session)
        assert stored is not None and stored.embedding_dim == 768
        with pytest.raises(EmbeddingMismatchError, match="makes 384-d vectors but this database stores 768-d"):
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)


def test_a_read_before_the_first_write_checks_nothing(db):
    with db.transaction() as session:
        check_index_settings(session, model_id="bge-base", dim=768, fts_config="english")
        assert read_index_settings(session) is None


def test_other_fts_config_is_refused(db):
    with db.transaction() as session:
        check_index_settings(session, model_id=MODEL, dim=384, fts_config="english", record=True)
        with pytest.raises(EmbeddingMismatchError, match="RAG_FTS_CONFIG is 'simple'"):
            check_index_settings(session, model_id=MODEL, dim=384, fts_config="simple")
