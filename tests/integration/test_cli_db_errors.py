"""Database failures through the ``rag`` command: one line naming the fix, exit status 1, no traceback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from rag_service.db.admin import admin_params
from tests.integration.test_cli import cli_env, rag  # noqa: F401 (a fixture)

pytestmark = pytest.mark.multiprocess

#: the tables a search reads; a test's ACCESS EXCLUSIVE lock on them makes any query wait
SEARCHED_TABLES = "documents, document_chunks"


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_statement_timeout_during_query_names_the_setting(cli_env, tmp_path):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / "n.md").write_text("# Backups\n\nNightly backups are restored with pg_restore into a new cluster.\n")
    assert rag(cli_env, "reindex", "n.md", "--quiet", cwd=tmp_path).returncode == 0
    cli_env["RAG_STATEMENT_TIMEOUT_MS"] = "300"
    with psycopg.connect(**admin_params(cli_env["RAG_DATABASE_URL"]) | {"autocommit": False}) as holder:
        holder.execute(f"LOCK TABLE {SEARCHED_TABLES} IN ACCESS EXCLUSIVE MODE")  # the query waits past 300 ms
        result = rag(cli_env, "query", "how are backups restored?")
        holder.rollback()
    assert_one_line_error(result, "RAG_STATEMENT_TIMEOUT_MS", "statement timeout")
    answered = rag(cli_env, "query", "how are backups restored?")
    assert answered.returncode == 0 and "n.md" in answered.stdout, "without the lock the same query answers"


@pytest.fixture
def plain_role(cli_env) -> Iterator[tuple[dict[str, str], str]]:  # noqa: F811
    """``cli_env`` logged in as a new role that is no superuser (so it may not CREATE EXTENSION vector),
    and the superuser's URL of the same database."""
    role = f"rag_plain_{uuid.uuid4().hex[:8]}"
    url = cli_env["RAG_DATABASE_URL"]
    with psycopg.connect(**admin_params(url)) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER')
    env = dict(cli_env, RAG_DATABASE_URL=make_url(url).set(username=role).render_as_string(hide_password=False))
    yield env, url
    with psycopg.connect(**admin_params(url)) as admin:
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')


def test_upgrade_without_the_right_to_create_the_vector_extension(plain_role):
    env, admin_url = plain_role
    with psycopg.connect(**admin_params(admin_url)) as admin:
        admin.execute(f'GRANT CREATE ON SCHEMA public TO "{make_url(env["RAG_DATABASE_URL"]).username}"')
    result = rag(env, "db", "upgrade")
    assert_one_line_error(result, "CREATE EXTENSION vector", "install pgvector >= 0.8 on the server")


def test_other_database_refusals_are_one_line(plain_role):
    # no CREATE on schema public: alembic's own version table is refused before any migration runs
    result = rag(plain_role[0], "db", "upgrade")
    assert_one_line_error(result, "permission denied for schema public", "SQLSTATE 42501")


def test_a_schema_from_a_newer_release_is_refused_in_one_line_and_never_migrated(cli_env):  # noqa: F811
    """A database a newer release migrated (its revision unknown here): query, upgrade and status name both
    revisions and the fix (upgrade rag_service), never `rag db upgrade`, and nothing is migrated."""
    from rag_service.db.migrate import head_revision

    assert rag(cli_env, "db", "upgrade").returncode == 0
    newer = f"{int(head_revision()) + 1:04d}"
    with psycopg.connect(**admin_params(cli_env["RAG_DATABASE_URL"])) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (newer,))
    for command in (("query", "presets"), ("db", "upgrade"), ("reindex", "--all")):
        assert_one_line_error(
            rag(cli_env, *command), f"revision {newer}", f"release's {head_revision()}", "upgrade rag_service"
        )
    status = rag(cli_env, "db", "status")
    assert status.returncode == 1 and "rag db upgrade" not in status.stdout + status.stderr, status.stdout
    assert f"{newer} (head {head_revision()}) - newer than this release" in status.stdout
    with psycopg.connect(**admin_params(cli_env["RAG_DATABASE_URL"])) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(newer,)]


def test_the_embedded_database_of_a_newer_release_is_not_migrated_by_the_service(database_factory, settings):
    """``build_service`` migrates its own embedded database on demand: ``migrate.upgrade`` refuses this one."""
    from rag_service.db import migrate
    from rag_service.db.engine import make_engine
    from rag_service.errors import SchemaError

    engine = make_engine(database_factory.create("rag_newer"), settings)
    try:
        migrate.upgrade(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
        with pytest.raises(SchemaError, match=r"revision 9999, newer than this release's \d{4} .*upgrade rag_service"):
            migrate.upgrade(engine)
        with pytest.raises(SchemaError, match="revision 9999, newer"):
            migrate.downgrade(engine, "0001")
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", [("db", "status"), ("query", "hello")])
def test_a_data_folder_that_cannot_be_made_is_one_line_naming_rag_data_dir(cli_env, tmp_path, command):  # noqa: F811
    (tmp_path / "a-file").write_text("not a folder")
    env = {k: v for k, v in cli_env.items() if k != "RAG_DATABASE_URL"}  # the embedded server, under the folder
    env["RAG_DATA_DIR"] = str(tmp_path / "a-file" / "rag")
    result = rag(env, *command)
    assert_one_line_error(result, f"RAG_DATA_DIR ({tmp_path / 'a-file' / 'rag'})", "Not a directory", "writable folder")
