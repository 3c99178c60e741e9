"""The chunk vectors' HNSW graph built with ``ef_construction`` 128 (was 64).

On realistic vectors at a million chunks the graph built with 64 reached recall@20 0.73 with
``hnsw.ef_search`` 100 and 0.945 only at pgvector's limit of 1000 (31 / 63 ms p50 / p95); built with
128 it reaches 0.966 at 400 with a SELECT p95 of 13.7 ms (0.966 at 100k with 100 against 0.959):
docs/benchmarks.md, "Session 12" and "Session 13". ``ef_search_for`` grows ef_search with the
collection for this graph. The index is rebuilt here, so upgrading a large database takes as long as
building the index (about 400 s at 1M chunks on 2 cores, a few seconds below 10k); readers of
``document_chunks`` wait for it. An index whose build parameters were changed by hand is left alone.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from rag_service.db.bulk import index_memory

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_document_chunks_embedding_hnsw"
#: (before, after) as values: a migration must not change when the code's defaults do
BEFORE = ["m=16", "ef_construction=64"]
AFTER = ["m=16", "ef_construction=128"]

_log = logging.getLogger("alembic.runtime.migration")


def _rebuild(expected: list[str], wanted: list[str]) -> None:
    bind = op.get_bind()
    options = bind.execute(
        sa.text("SELECT reloptions FROM pg_class WHERE oid = to_regclass(:name)"), {"name": INDEX}
    ).scalar()
    if options is None or sorted(options) != sorted(expected):
        return  # no such index, or built with parameters of the user's own
    chunks = bind.execute(sa.text("SELECT count(*) FROM document_chunks")).scalar_one()
    _log.info("rebuilding %s over %d chunks with %s (readers wait for it)", INDEX, chunks, ", ".join(wanted))
    bind.execute(sa.text("SELECT set_config('maintenance_work_mem', :memory, true)"), {"memory": index_memory(chunks)})
    op.drop_index(INDEX, table_name="document_chunks")
    op.create_index(
        INDEX,
        "document_chunks",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with=dict(option.split("=") for option in wanted),
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )


def upgrade() -> None:
    _rebuild(BEFORE, AFTER)


def downgrade() -> None:
    _rebuild(AFTER, BEFORE)
