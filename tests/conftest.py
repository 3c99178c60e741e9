"""One real PostgreSQL + pgvector for the whole run, migrated once; each test in a rolled-back transaction.

``RAG_TEST_DATABASE=testcontainers`` uses the pgvector/pgvector image when a Docker engine answers;
otherwise (the default) the embedded server under ``RAG_TEST_DATA_DIR`` (default ``.rag_test_data``).
Under pytest-xdist (``make test`` runs 3 workers) each worker has its own data folder and server,
``<RAG_TEST_DATA_DIR>/<worker>``, so a worker's tests see the server as a serial run does; the ONNX
export is made once, under a lock, in the shared folder and linked into each worker's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import make_url

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.admin import admin_params, database_url
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine, normalise_url

if TYPE_CHECKING:
    from rag_service.embed import Embedder
    from rag_service.ingest.indexer import Indexer

REPO = Path(__file__).resolve().parents[1]
#: the folder shared by every worker of a run (the ONNX export lives here)
SHARED_TEST_DATA_DIR = Path(os.environ.get("RAG_TEST_DATA_DIR", REPO / ".rag_test_data"))
#: this process's folder: the embedded server and what the tests' settings point at
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ... under pytest-xdist
TEST_DATA_DIR = SHARED_TEST_DATA_DIR / _WORKER if _WORKER else SHARED_TEST_DATA_DIR
EXPORT_DIR = Path("models") / "embed-onnx"


def _private_dir(path: Path) -> Path:
    """``path`` and its missing parents, each readable by its owner only (as the data folder's own are)."""
    for missing in reversed([p for p in (path, *path.parents) if not p.exists()]):
        missing.mkdir(mode=0o700, exist_ok=True)
    return path


def _mirror_export(export: Path) -> None:
    """Hard links to the shared export's files in this worker's folder, where its ``settings`` look."""
    own = TEST_DATA_DIR / EXPORT_DIR / export.name
    if TEST_DATA_DIR == SHARED_TEST_DATA_DIR or own.is_dir():
        return
    staging = _private_dir(own.with_name(f".{own.name}.{os.getpid()}"))
    for file in export.iterdir():
        os.link(file, staging / file.name)
    staging.rename(own)


def _shared_export_lock() -> int:
    """An exclusive lock on the shared folder's export (a file descriptor; closing it releases)."""
    fd = os.open(_private_dir(SHARED_TEST_DATA_DIR) / ".export.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _testcontainers_url() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:
        print(f"\nRAG_TEST_DATABASE=testcontainers but no Docker engine answers ({exc}); using embedded")
        return None
    from testcontainers.postgres import PostgresContainer

    container = PostgresContainer("pgvector/pgvector:pg17", driver="psycopg")
    container.start()
    import atexit

    atexit.register(container.stop)
    return normalise_url(container.get_connection_url())


#: the disk the suite's servers need beside the venv: their folders peaked at 2.0 GB in a run of 3 workers (du, 5 s)
_SUITE_DISK_BYTES = 2 * 2**30


def _free_disk_bytes() -> int:
    """Free bytes on the disk of the test data folder (of its nearest existing parent before the first run)."""
    folder = next(p for p in (SHARED_TEST_DATA_DIR, *SHARED_TEST_DATA_DIR.parents) if p.exists())
    return shutil.disk_usage(folder).free


def pytest_report_header() -> str:
    """The free disk in the run's header: a run on a nearly full disk fails in every database test at once."""
    return f"rag_service: {_free_disk_bytes() / 2**30:.1f} GB free on the disk of {SHARED_TEST_DATA_DIR}"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, in one line, when the disk cannot hold the suite's database servers."""
    if _WORKER is not None:  # the controller checked for every worker
        return
    free = _free_disk_bytes()
    if free < _SUITE_DISK_BYTES:
        pytest.exit(
            f"only {free // 2**20:,} MB are free on the disk of {SHARED_TEST_DATA_DIR}; the suite's database "
            "servers need about 2 GB: free disk space, or set RAG_TEST_DATA_DIR to a folder on a larger disk",
            returncode=1,
        )


def _file_rank(item: pytest.Item) -> int:
    """0 for a ``slow`` test, 1 for a ``multiprocess`` one, 2 for the rest."""
    return 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("multiprocess") else 2


#: why a ``timing`` test is skipped under pytest-xdist: its wall times would include the other workers' load
_TIMING_ALONE = "a timing test runs alone, not beside xdist workers: make test runs it after them (pytest -m timing)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``timing`` tests are skipped under xdist (they run alone afterwards). Files holding long tests first,
    each file's tests in their order. Under ``--dist loadfile`` a worker takes the next file when it is free:
    xdist's own order (most tests first) left the few-test, longest files (the Citus comparison, the fuzz
    file, the crash and stop-signal runs) for last, so that one worker ran on for minutes after the others
    had finished (the Makefile passes ``--no-loadscope-reorder``)."""
    rank: dict[str, int] = {}
    for item in items:
        if _WORKER is not None and item.get_closest_marker("timing"):
            item.add_marker(pytest.mark.skip(reason=_TIMING_ALONE))
        file = item.nodeid.split("::")[0]
        rank[file] = min(rank.get(file, 2), _file_rank(item))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: a file's tests keep their order


@pytest.fixture(scope="session")
def server_url() -> str:
    """URL of a database on the test server (used to create per-run databases)."""
    if os.environ.get("RAG_TEST_DATABASE") == "testcontainers":
        url = _testcontainers_url()
        if url:
            return url
    _private_dir(SHARED_TEST_DATA_DIR)
    url = start_embedded_server(TEST_DATA_DIR)
    _tune_test_server(url)
    return url


#: settings of the test servers (reloaded, no restart); see ``_tune_test_server``
_TEST_SERVER_SETTINGS = {"fsync": "off", "max_wal_size": "256MB"}


def _tune_test_server(url: str) -> None:
    """The test server does not fsync (as the Citus test cluster): a run's synchronous commits, database
    drops and shutdown checkpoint need not wait on the disk (pytest 8:54 -> 8:24 on a fresh clone, one run
    each). Tests that kill a server start their own; a killed process loses nothing the OS holds. It keeps
    less WAL than the default 1 GB: each worker's server held up to 785 MB of it in a run."""
    with psycopg.connect(**admin_params(url)) as conn:  # type: ignore[arg-type]
        changed = False
        for name, value in _TEST_SERVER_SETTINGS.items():
            if conn.execute("SELECT current_setting(%s)", (name,)).fetchone() != (value,):
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                changed = True
        if changed:
            conn.execute("SELECT pg_reload_conf()")


class DatabaseFactory:
    """Creates empty databases on the test server and drops them at the end of the run."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.created: list[str] = []

    def create(self, prefix: str = "rag_test") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(**admin_params(self.server_url)) as conn:  # type: ignore[arg-type]
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return database_url(self.server_url, name)

    def drop(self, url: str) -> None:
        """Drop one database this factory created (its disk space is free for the rest of the run)."""
        name = str(make_url(url).database)
        self._drop([name])
        self.created.remove(name)

    def drop_all(self) -> None:
        self._drop(self.created)

    def _drop(self, names: list[str]) -> None:
        with psycopg.connect(**admin_params(self.server_url)) as conn:  # type: ignore[arg-type]
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def database_factory(server_url: str) -> Iterator[DatabaseFactory]:
    factory = DatabaseFactory(server_url)
    yield factory
    factory.drop_all()


@pytest.fixture(scope="session")
def settings() -> Settings:
    """Settings for tests: small pool; the database comes from fixtures, not from the environment."""
    return Settings(database_url=None, data_dir=TEST_DATA_DIR, pool_size=4, pool_max_overflow=4)


@pytest.fixture(scope="session")
def migrated_url(database_factory: DatabaseFactory) -> str:
    """A database migrated to head once for the whole run."""
    return database_factory.create()


@pytest.fixture(scope="session")
def engine(migrated_url: str, settings: Settings) -> Iterator[Engine]:
    eng = make_engine(migrated_url, settings)
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def connection(engine: Engine) -> Iterator[Connection]:
    """A connection inside a transaction that is rolled back after the test."""
    conn = engine.connect()
    outer = conn.begin()
    yield conn
    outer.rollback()
    conn.close()


@pytest.fixture
def db(engine: Engine, connection: Connection) -> Database:
    """The service's Database joined to the test's transaction (its commits become savepoints)."""
    return Database(engine, bind=connection)


@pytest.fixture
def indexer(db: Database, settings: Settings) -> Indexer:
    """An indexer on the test's database with the hashing embedder (no model); a test file needing another
    embedder or a graph defines its own."""
    from rag_service.embed import HashingEmbedder
    from rag_service.ingest.indexer import Indexer

    return Indexer(db, HashingEmbedder(), settings)


@pytest.fixture
def fresh_database(database_factory: DatabaseFactory, settings: Settings) -> Iterator[Database]:
    """A migrated database of its own whose transactions really commit (threads, processes, locks); dropped after
    the test."""
    url = database_factory.create("rag_fresh")
    eng = make_engine(url, settings)
    migrate.upgrade(eng)
    yield Database(eng)
    eng.dispose()
    database_factory.drop(url)


@pytest.fixture(scope="session")
def onnx_export() -> Path:
    """The bundled MiniLM's ONNX export, made once under the test data folder (torch needed that once)."""
    from rag_service.embed import bundled_model_path
    from rag_service.embed_onnx import ensure_export

    lock = _shared_export_lock()  # the other worker waits for the export, then reuses it
    try:
        export = ensure_export(bundled_model_path(), SHARED_TEST_DATA_DIR / EXPORT_DIR)
        _mirror_export(export)
        return export
    finally:
        os.close(lock)


@pytest.fixture(scope="session")
def default_minilm(onnx_export: Path) -> Embedder:
    """The bundled MiniLM as a user's service loads it by default (int8 on ONNX Runtime, no torch), from the
    run's export; one per worker."""
    from rag_service.embed import BUNDLED_MINILM, load_embedder

    return load_embedder(BUNDLED_MINILM, cache_dir=onnx_export.parents[1])


def seed_onnx_export(data_dir: Path, export: Path) -> None:
    """Let a process with ``RAG_DATA_DIR=data_dir`` find ``export`` where it would have written it."""
    folder = data_dir / "models" / "embed-onnx"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / export.name).symlink_to(export, target_is_directory=True)
