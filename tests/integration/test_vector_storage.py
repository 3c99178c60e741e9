"""Chunk vectors stay in their row (migration 0010): reading one is no TOAST lookup."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, text

from rag_service.db.database import Database
from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer

#: a chunk row over this many bytes had its vector moved out of the row under pgvector's EXTERNAL storage
TOAST_THRESHOLD = 2032

#: prose long enough that each chunk row (text, tsvector and 1.5 kB of vector) is over the threshold
LONG_SECTION = "## Restores\n\n" + " ".join(
    f"Backup {i} restores the primary from its base copy and replays write-ahead segments in order." for i in range(60)
)


def vector_layout(conn: Connection) -> tuple[int, int]:
    """(chunk rows over the TOAST threshold, chunk vectors stored out of their row)."""
    row = conn.execute(
        text(
            "SELECT count(*) FILTER (WHERE pg_column_size(c.*) > :threshold), "
            "count(*) FILTER (WHERE pg_column_toast_chunk_id(c.embedding) IS NOT NULL) FROM document_chunks c"
        ),
        {"threshold": TOAST_THRESHOLD},
    ).one()
    return int(row[0]), int(row[1])


def test_a_large_chunk_keeps_its_vector_in_the_row(fresh_database: Database, settings, tmp_path: Path) -> None:
    (tmp_path / "restores.md").write_text(f"# Operations\n\n{LONG_SECTION}\n")
    report = Indexer(fresh_database, HashingEmbedder(), settings).index_paths([tmp_path], collection="ops")
    assert report.failed == [] and report.added == 1
    with fresh_database.engine.connect() as conn:
        large, out_of_line = vector_layout(conn)
    assert large > 0, "the test needs rows over the TOAST threshold"
    assert out_of_line == 0
