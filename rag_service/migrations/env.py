"""Alembic environment: migrates the connection it is handed, or the configured database."""

from __future__ import annotations

import re
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, pool, text

from rag_service.db.models import Base
from rag_service.db.partitions import PARTITION_NAME_PATTERN

config = context.config
if config.config_file_name is not None and not config.attributes.get("skip_logging_config"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Leave out the per-collection partitions of ``rag db upgrade --partition-by-collection``."""
    return not (type_ == "table" and name is not None and re.match(PARTITION_NAME_PATTERN, name))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection, target_metadata=target_metadata, compare_type=True, include_name=_include_name
    )
    with context.begin_transaction():
        # Citus: one connection per worker for the whole upgrade, so that a migration may create a function
        # (0013) after another ran a multi-shard command (0012's index rebuild); a placeholder setting without it
        connection.execute(text("SET LOCAL citus.multi_shard_modify_mode = 'sequential'"))
        context.run_migrations()


def run_migrations_online() -> None:
    """Use ``config.attributes['connection']`` when given (tests, ``rag db``), else build an engine."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from sqlalchemy import create_engine

    from rag_service.config import load_settings
    from rag_service.db.engine import resolve_database_url

    url = config.get_main_option("sqlalchemy.url") or resolve_database_url(load_settings())
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
