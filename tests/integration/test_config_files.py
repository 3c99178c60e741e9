"""Configuration files are indexed by their sections (audit 56b D14): ``auto`` chunks ``pyproject.toml`` at its tables,
so "which setting makes mypy strict" finds ``pyproject.toml > tool.mypy``, cited by its lines in a TOML fence."""

from __future__ import annotations

from pathlib import Path

from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService

PYPROJECT = """\
[project]
name = "demo"
dependencies = ["numpy>=1.26", "sqlalchemy>=2.0", "pgvector>=0.3", "alembic>=1.13"]

[tool.mypy]
python_version = "3.11"
strict = true
warn_unreachable = true

[tool.ruff]
line-length = 120
target-version = "py311"
"""


def test_a_toml_table_is_a_header_and_is_cited_by_its_lines(db, settings, tmp_path: Path):
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "broken.yaml").write_text("jobs:\n  test: [unclosed\n\tbad: indentation here, still indexed\n")
    assert service.index_paths([tmp_path], collection="cfg").added == 2
    result = service.retrieve(
        "warn_unreachable strict", "search", collection="cfg", vector_weight=0.0, keyword_weight=1.0
    )
    chunk = result.chunks[0]
    assert chunk.header_path == "pyproject.toml > tool.mypy"
    assert PYPROJECT[chunk.start_char : chunk.end_char] == chunk.content
    assert (chunk.start_line, chunk.end_line) == (5, 8)
    assert f"{chunk.source}:L5-8 · pyproject.toml > tool.mypy (relevance" in result.formatted_context
    assert "```toml\n[tool.mypy]\n" in result.formatted_context
    broken = service.retrieve("indentation", "search", collection="cfg", vector_weight=0.0, keyword_weight=1.0)
    assert broken.chunks and broken.chunks[0].header_path == "broken.yaml > jobs"
