"""SIGKILL during rag reindex never leaves a half-written document (the full run: scripts/crash_test.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _crash_module():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location("crash_test", SCRIPTS / "crash_test.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["crash_test"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_kills_leave_old_or_new_versions_only():
    # 120 documents span two embedding batches, so the first kill lands between their commits
    findings = _crash_module().run(kills=4, documents=120, seed=7)
    assert findings.violations == []
    assert findings.versions_seen["missing"] == 0, "every file was indexed before the first kill"
    assert findings.documents_checked == (4 + 1) * 120  # after each kill and after the recovery run
    assert findings.mid_run_kills >= 1, f"no kill left old and new documents side by side: {findings.kills}"
