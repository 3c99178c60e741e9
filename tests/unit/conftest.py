"""Fixtures the unit tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No ``RAG_*`` variable set and a working directory of its own (no stray ``.env``), for settings tests."""
    for name in [n for n in os.environ if n.upper().startswith("RAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return monkeypatch
