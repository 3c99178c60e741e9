"""``make bench`` on a fresh clone: the benchmark's server report works before any database has pgvector."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_server_info_on_a_database_without_the_extension(database_factory):
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    from bench_lib.store import server_info

    info = server_info(database_factory.create("rag_no_extension"))  # CREATE EXTENSION never ran here
    assert str(info["pgvector"]).count(".") >= 1, info
    assert info["postgres"] and info["shared_buffers"], info
