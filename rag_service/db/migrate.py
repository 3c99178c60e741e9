"""Run alembic from code: upgrade, downgrade, current revision, drift check."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

#: the migrations ship inside the package, so an installed wheel migrates as a checkout does
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic config for this project; with ``connection`` the migrations run on it."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["skip_logging_config"] = True
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head", *, partition_by_collection: bool = False) -> None:
    """Migrate the database to ``revision`` in one transaction; at head, on a Citus coordinator the
    tables are then distributed by collection (``db.citus``), and with ``partition_by_collection``
    the (empty) chunk tables become LIST-partitioned by collection (``db.partitions``)."""
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), revision)
        if revision == "head":
            from rag_service.db.citus import distribute

            distribute(conn)
            if partition_by_collection:
                from rag_service.db.partitions import partition_by_collection as partition

                partition(conn)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database down to ``revision``."""
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), revision)


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision the code knows (read once per process; ``head_revision.cache_clear()`` resets)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None before the first migration)."""
    return MigrationContext.configure(connection).get_current_revision()
