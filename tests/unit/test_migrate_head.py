"""The schema check's head revision, read without alembic, is alembic's own answer."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory

from rag_service.db import migrate


def test_head_revision_read_from_the_files_is_alembics_head():
    migrate.head_revision.cache_clear()
    assert migrate.head_revision() == ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()


def test_a_second_head_is_refused(tmp_path, monkeypatch):
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text('revision: str = "a"\ndown_revision: str | None = None\n')
    (versions / "b.py").write_text('revision = "b"\ndown_revision = "a"\n')
    (versions / "c.py").write_text("revision = 'c'\ndown_revision = 'a'\n")
    monkeypatch.setattr(migrate, "MIGRATIONS", tmp_path)
    migrate.head_revision.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"2 heads \(\['b', 'c'\]\)"):
            migrate.head_revision()
        (versions / "c.py").unlink()
        migrate.head_revision.cache_clear()
        assert migrate.head_revision() == "b"
    finally:
        migrate.head_revision.cache_clear()
