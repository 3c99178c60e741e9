"""Settings come from RAG_* variables and .env, typed and bounded, with one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_service.config import Settings, default_shared_buffers, load_settings, machine_memory_bytes
from rag_service.errors import ConfigurationError


def test_defaults_without_environment(clean_env):
    assert load_settings() == Settings()
    assert load_settings().database_url is None and load_settings().data_dir == Path(".rag_data")


def test_every_type_is_read_from_the_environment(clean_env):
    clean_env.setenv("RAG_DATABASE_URL", "postgresql+psycopg://u@h/db")
    clean_env.setenv("RAG_DATA_DIR", "/srv/rag")
    clean_env.setenv("rag_pool_size", "7")  # names are case-insensitive, as before
    clean_env.setenv("RAG_BM25_B", "0.5")
    clean_env.setenv("RAG_EMBED_HEADERS", "off")
    clean_env.setenv("RAG_NOT_A_SETTING", "ignored")
    settings = load_settings(log_level="INFO")
    assert settings.database_url == "postgresql+psycopg://u@h/db"
    assert settings.data_dir == Path("/srv/rag")
    assert (settings.pool_size, settings.bm25_b, settings.embed_headers, settings.log_level) == (7, 0.5, False, "INFO")


def test_a_dotenv_file_fills_what_the_environment_lacks(clean_env, tmp_path):
    lines = ["RAG_POOL_SIZE=9", 'export RAG_RERANK_MODEL="none"', "# RAG_CHUNK_SIZE=1", "RAG_BM25_K1=2"]
    (tmp_path / ".env").write_text("\n".join(lines) + "\n")
    clean_env.setenv("RAG_BM25_K1", "1.5")
    settings = load_settings()
    assert (settings.pool_size, settings.rerank_model, settings.chunk_size, settings.bm25_k1) == (9, "none", 500, 1.5)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RAG_POOL_SIZE", "0", r"RAG_POOL_SIZE \(0\) must be at least 1 and at most 100"),
        ("RAG_POOL_SIZE", "many", r"RAG_POOL_SIZE \('many'\) must be a number \(int\)"),
        ("RAG_BM25_B", "1.5", r"RAG_BM25_B \(1\.5\) must be at least 0\.0 and at most 1\.0"),
        ("RAG_EMBED_HEADERS", "maybe", r"RAG_EMBED_HEADERS \('maybe'\) must be true or false"),
        ("RAG_FTS_CONFIG", "english; drop", r"RAG_FTS_CONFIG .* must be a text-search configuration name"),
        ("RAG_EMBEDDING_MODEL", "", r"RAG_EMBEDDING_MODEL is empty; unset it for the bundled all-MiniLM-L6-v2"),
        ("RAG_RERANK_MODEL", " ", r"RAG_RERANK_MODEL is empty; set it to 'none' to turn reranking off"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(clean_env, name, value, message):
    clean_env.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message) as caught:
        load_settings()
    assert "\n" not in str(caught.value)


def test_an_unknown_override_is_refused(clean_env):
    with pytest.raises(ConfigurationError, match=r"unknown setting\(s\) pool; known: database_url"):
        load_settings(pool=3)


@pytest.mark.parametrize(
    ("memory", "expected"),
    [(24 * 2**30, "6144MB"), (2 * 2**30, "512MB"), (256 * 2**20, "128MB"), (128 * 2**30, "8192MB")],
)
def test_the_embedded_servers_shared_buffers_are_a_quarter_of_the_memory_within_bounds(memory, expected):
    assert default_shared_buffers(memory) == expected


def test_the_memory_is_the_cgroup_limit_when_that_is_lower(tmp_path):
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = tmp_path / "memory.max"
    assert machine_memory_bytes(limit) == physical  # no cgroup file
    limit.write_text("max\n")
    assert machine_memory_bytes(limit) == physical
    limit.write_text(f"{2**30}\n")
    assert machine_memory_bytes(limit) == 2**30
    limit.write_text(f"{physical * 2}\n")
    assert machine_memory_bytes(limit) == physical
