"""The packed postings' tombstone triggers on a schema partitioned by collection.

``rag db upgrade --partition-by-collection`` rebuilds ``document_chunks`` as a partitioned table and re-created the
triggers of migrations 0002/0005 on it, but not 0014's: on such a database a chunk deleted or rewritten after its
collection was packed left no tombstone, so the exact BM25 arm (``db.packed_postings``) counted a deleted chunk in
its top k (fewer hits than asked) and scored a rewritten one by its old postings; and ``rag reindex --all`` of a
collection beside others on the bulk path failed at once, disabling a trigger that did not exist. This creates the
missing triggers. A plain table has them from 0014; Citus has none by design.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

import logging
from collections.abc import Sequence

from alembic import op

from rag_service.db.partitions import add_packed_triggers

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    added = add_packed_triggers(op.get_bind())
    if added:
        _log.info("partitioned document_chunks: created %s", ", ".join(added))


def downgrade() -> None:
    """Nothing: 0016's partitioned schema with the triggers is what 0014 meant it to be."""
