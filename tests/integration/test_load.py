"""Concurrent retrieve() during a reindex: no errors, no torn documents, bounded pool (full run:
scripts/load_test.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.mark.parametrize("parallel_arms_from", [None, 1])  # 1: every search runs its arms at once
def test_readers_during_reindex(parallel_arms_from, monkeypatch):
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location("load_test", SCRIPTS / "load_test.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["load_test"] = module
    spec.loader.exec_module(module)
    from rag_service.db import parallel_search

    monkeypatch.setattr(parallel_search, "has_idle_core", lambda engine: True)  # the suite's own load aside
    report, settings = module.run(
        threads=4, calls=40, documents=20, model="hashing", parallel_arms_from=parallel_arms_from
    )
    details = f"errors={dict(report.errors)} calls={report.calls} torn={report.torn} runs={report.reindex_runs}"
    assert report.errors == {}, details
    assert report.calls == 160, details
    assert report.torn == 0, details
    assert report.reindex_runs >= 1, details
    assert report.max_checked_out <= settings.pool_size + settings.pool_max_overflow, details
