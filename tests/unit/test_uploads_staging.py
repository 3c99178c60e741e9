"""Uploads are staged in a folder of their own per request (``rag_service.uploads.staging_folder``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rag_service.uploads import STALE_STAGING_S, staging_folder, store_upload


def test_a_staging_folder_a_killed_process_left_is_removed_by_the_next_request(tmp_path: Path) -> None:
    """A server killed mid-upload left ``uploads/.staging-*`` with the request's files, never removed (audit 55a)."""
    left = tmp_path / ".staging-killed"
    left.mkdir()
    (left / "notes.md").write_text("an upload of a request that never ended")
    old = time.time() - STALE_STAGING_S - 60
    os.utime(left, (old, old))
    running = tmp_path / ".staging-running"  # another process's request, under way
    running.mkdir()
    with staging_folder(tmp_path) as folder:
        store_upload(folder, "a.md", b"# A\n")
        assert not left.exists()
        assert running.is_dir() and (folder / "a.md").is_file()
    assert not folder.exists() and running.is_dir()
