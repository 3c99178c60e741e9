"""Run alembic from code: upgrade, downgrade, current revision, drift check.

alembic is imported only by the commands that migrate: its import (mako, pygments) costs about
0.25 s, most of a no-op ``rag reindex``, so the schema check reads the revisions without it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from rag_service.db.messages import url_for_display
from rag_service.errors import ExtensionMissingError, SchemaError, first_line

if TYPE_CHECKING:
    from alembic.config import Config

#: the migrations ship inside the package, so an installed wheel migrates as a checkout does
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"

_REVISION = re.compile(r'^(down_)?revision\b[^=\n]*=\s*(?:"([^"]*)"|\'([^\']*)\'|None)', re.MULTILINE)


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic config for this project; with ``connection`` the migrations run on it."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["skip_logging_config"] = True
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head", *, partition_by_collection: bool = False) -> None:
    """Migrate the database to ``revision`` in one transaction; at head, on a Citus coordinator the
    tables are then distributed by collection (``db.citus``), and with ``partition_by_collection``
    the (empty) chunk tables become LIST-partitioned by collection (``db.partitions``).

    Concurrent upgrades of one database (two processes starting on a new one) take turns (``_one_at_a_time``):
    the later one finds the revision the first committed, and has nothing left to do."""
    from alembic import command

    try:
        with engine.begin() as conn:
            refuse_newer_schema(conn, engine)
            _no_statement_timeout(conn)
            _one_at_a_time(conn)
            command.upgrade(alembic_config(conn), revision)
            _require_pgvector(conn, engine)
            if revision == "head":
                from rag_service.db.citus import distribute

                distribute(conn)
                if partition_by_collection:
                    from rag_service.db.partitions import partition_by_collection as partition

                    partition(conn)
    except DBAPIError as exc:
        if _creates_vector_extension(exc.statement):
            raise _extension_missing(engine, exc) from exc
        raise


#: iterative index scans (``hnsw.iterative_scan``), which every filtered vector search sets, came with 0.8.0
PGVECTOR_MINIMUM = (0, 8)


def pgvector_too_old(version: str) -> bool:
    """Whether pgvector ``version`` (``extversion``, e.g. '0.7.4') predates ``PGVECTOR_MINIMUM``."""
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    return parts < PGVECTOR_MINIMUM


def _require_pgvector(conn: Connection, engine: Engine) -> None:
    """Refuse a database whose pgvector is older than the searches need, with the fix, before the migration
    commits (an older one failed every query with 'unrecognized configuration parameter')."""
    version = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
    if version is not None and pgvector_too_old(str(version)):
        raise ExtensionMissingError(
            f"pgvector {version} on {url_for_display(engine)} is older than 0.8, which rag_service needs "
            "(iterative index scans): install pgvector >= 0.8 on the server and run ALTER EXTENSION vector UPDATE "
            "in this database, then `rag db upgrade` again"
        )


def _creates_vector_extension(statement: str | None) -> bool:
    words = " ".join((statement or "").lower().split())
    return words.startswith("create extension") and "vector" in words


def _extension_missing(engine: Engine, exc: DBAPIError) -> ExtensionMissingError:
    return ExtensionMissingError(
        f"CREATE EXTENSION vector on {url_for_display(engine)} failed ({first_line(exc)}); "
        "install pgvector >= 0.8 on the server (or have an administrator CREATE EXTENSION vector in this "
        "database), then run `rag db upgrade` again"
    )


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database down to ``revision``."""
    from alembic import command

    with engine.begin() as conn:
        refuse_newer_schema(conn, engine)
        _no_statement_timeout(conn)
        _one_at_a_time(conn)
        command.downgrade(alembic_config(conn), revision)


#: the advisory lock (class "RM", key) a migration holds until it commits; db.locks' collection locks are one-bigint
#: locks (tagged "RA"), another key space
_MIGRATION_LOCK = {"cls": 0x524D, "key": 0}


def _one_at_a_time(conn: Connection) -> None:
    """Wait for any other migration of this database to commit, then hold the lock until this one does. Run
    unlocked, two first starts both created the schema: one failed on a duplicate catalog row (pg_type)."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:cls, :key)"), _MIGRATION_LOCK)


def _no_statement_timeout(conn: Connection) -> None:
    # RAG_STATEMENT_TIMEOUT_MS bounds queries; a migration rebuilding keys of a 1M-chunk database
    # (90M postings) runs for minutes and must not be cancelled half-way
    conn.execute(text("SET LOCAL statement_timeout = 0"))


def _revisions() -> tuple[frozenset[str], frozenset[str]]:
    """Every revision of the migration files, and those a migration names as its ``down_revision``."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        for match in _REVISION.finditer(path.read_text(encoding="utf-8")):
            value = match.group(2) or match.group(3)
            if value:
                (parents if match.group(1) else revisions).add(value)
    return frozenset(revisions), frozenset(parents)


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    """Every revision this release's migrations know (read once per process, as ``head_revision``)."""
    return _revisions()[0]


def newer_schema_error(revision: str | None, *, url: str) -> SchemaError | None:
    """The error for a database at a revision this release does not know (a newer release migrated it), or None.

    Such a database is never migrated: alembic cannot place the revision, and going back would lose what the
    newer release stored.
    """
    unknown = sorted(set((revision or "").split(",")) - known_revisions() - {""})
    if not unknown:
        return None
    return SchemaError(
        f"the database at {url} has schema revision {revision}, newer than this release's {head_revision()} "
        "(a newer rag_service migrated it); upgrade rag_service, or use the release that wrote it"
    )


def refuse_newer_schema(conn: Connection, engine: Engine) -> None:
    """Raise ``newer_schema_error`` for the database of ``conn`` if it has one (before any migration)."""
    error = newer_schema_error(current_revision(conn), url=url_for_display(engine))
    if error is not None:
        raise error


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision the code knows: the one no migration names as its ``down_revision``.

    Read from the migration files' ``revision``/``down_revision`` lines (a test checks it against
    alembic's own answer); once per process, ``head_revision.cache_clear()`` resets.
    """
    revisions, parents = _revisions()
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"the migrations in {MIGRATIONS} have {len(heads)} heads ({sorted(heads)}); expected one")
    return next(iter(heads))


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None before the first migration)."""
    if connection.execute(text("SELECT to_regclass('alembic_version')")).scalar() is None:
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return ",".join(sorted(rows)) or None
