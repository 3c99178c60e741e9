"""Alembic environment: migrates the connection it is handed, or the configured database."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, pool

from rag_service.db.models import Base

config = context.config
if config.config_file_name is not None and not config.attributes.get("skip_logging_config"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    with context.begin_transaction():
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
