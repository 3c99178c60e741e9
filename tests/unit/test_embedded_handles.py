"""The embedded server's handle list: dead pids dropped, a torn list (kill -9 mid-write) rewritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rag_service.db.embedded import clean_stale_pids


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_dead_pids_are_dropped_and_live_ones_kept(tmp_path: Path) -> None:
    dead = _dead_pid()
    (tmp_path / ".handle_pids.json").write_text(json.dumps([os.getpid(), dead]))
    assert clean_stale_pids(tmp_path) == [dead]
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == [os.getpid()]


def test_a_torn_list_is_rewritten_so_the_library_can_read_it(tmp_path: Path) -> None:
    (tmp_path / ".handle_pids.json").write_text("[1234, 56")
    assert clean_stale_pids(tmp_path) == []
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == []


def test_an_empty_list_is_rewritten_too(tmp_path: Path) -> None:
    # a stop between the library's truncation and its write left it empty: every later start failed
    # ("did not start (JSONDecodeError ...)") until the file was removed by hand
    (tmp_path / ".handle_pids.json").write_text("")
    assert clean_stale_pids(tmp_path) == []
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == []
