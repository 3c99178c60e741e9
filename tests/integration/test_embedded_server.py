"""The embedded server is shared between processes, survives kill -9 of a user and stops with the last."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rag_service.config import DEFAULT_SHARED_BUFFERS

pytestmark = pytest.mark.multiprocess

HOLDER = """
import sys
from rag_service.db.embedded import start_embedded_server
import psycopg
url = start_embedded_server(__import__('pathlib').Path(sys.argv[1]))
print(url, flush=True)
sys.stdin.read()  # hold the server until stdin closes
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rag_emb_", dir="/tmp"))
    yield path
    pid = _server_pid(path)
    if pid is not None:  # never leave a server behind, nor delete its files under it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        _wait_exited(pid)
    shutil.rmtree(path, ignore_errors=True)


def _wait_exited(pid: int, timeout: float = 60) -> None:
    """Return once process ``pid`` is gone (SIGKILL it after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.05)  # polling a condition


def _start_holder(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("postgresql+psycopg://"), url
    return proc, url


def _server_pid(data_dir: Path) -> int | None:
    pidfile = data_dir / "pg" / "postmaster.pid"
    with contextlib.suppress(FileNotFoundError, ValueError, IndexError):  # gone, or being written
        return int(pidfile.read_text().split()[0])
    return None


def _handles(data_dir: Path) -> list[int]:
    return [int(p) for p in json.loads((data_dir / "pg" / ".handle_pids.json").read_text())]


def _scalar(url: str, statement: str) -> object:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    with psycopg.connect(
        host=parsed.query["host"], port=parsed.query["port"], user="postgres", dbname=parsed.database
    ) as conn:
        row = conn.execute(statement).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return row[0]


def _query(url: str) -> int:
    return int(_scalar(url, "SELECT 1"))  # type: ignore[call-overload]


def _stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)
    if proc.stdout is not None:
        proc.stdout.close()


def _wait_stopped(data_dir: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while _server_pid(data_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _server_pid(data_dir) is None, "server still running after the last user exited"


def test_two_processes_share_one_server_and_last_one_stops_it(data_dir):
    first, url_a = _start_holder(data_dir)
    second, url_b = _start_holder(data_dir)
    try:
        assert url_a == url_b
        server = _server_pid(data_dir)
        assert server is not None
        assert sorted(_handles(data_dir)) == sorted([first.pid, second.pid])
        assert _query(url_a) == 1
        _stop(first)
        assert _server_pid(data_dir) == server, "server stopped while a user remained"
        assert _query(url_b) == 1
    finally:
        _stop(second)
    _wait_stopped(data_dir)


def test_kill_9_leaves_next_start_working(data_dir):
    victim, url = _start_holder(data_dir)
    victim.kill()
    victim.wait()
    for pipe in (victim.stdin, victim.stdout):
        if pipe is not None:
            pipe.close()
    assert victim.pid in _handles(data_dir), "precondition: a killed process leaves its pid behind"
    survivor, url_again = _start_holder(data_dir)
    try:
        assert url_again == url
        assert _handles(data_dir) == [survivor.pid], "stale pid was not cleaned at start"
        assert _query(url_again) == 1
    finally:
        _stop(survivor)
    _wait_stopped(data_dir)  # the stale pid no longer keeps the server alive


def _shared_buffers_bytes(url: str) -> int:
    return int(_scalar(url, "SELECT pg_size_bytes(current_setting('shared_buffers'))"))  # type: ignore[call-overload]


def test_a_new_server_gets_its_shared_buffers_at_once_and_a_joiner_does_not_restart_it(data_dir):
    first, url = _start_holder(data_dir)
    try:
        # Postgres' 128MB default, raised by a restart to ours (a quarter of this machine's memory)
        assert _shared_buffers_bytes(url) == int(DEFAULT_SHARED_BUFFERS.removesuffix("MB")) * 2**20 > 128 * 2**20
        server = _server_pid(data_dir)
        second, _ = _start_holder(data_dir)
        try:
            assert _server_pid(data_dir) == server, "a second user must join, not restart the server"
            assert _query(url) == 1
        finally:
            _stop(second)
    finally:
        _stop(first)
    _wait_stopped(data_dir)


def test_a_user_killed_with_9_does_not_keep_the_server_after_the_last_live_one_leaves(data_dir):
    live, url = _start_holder(data_dir)
    victim, _ = _start_holder(data_dir)
    victim.kill()
    victim.wait()
    for pipe in (victim.stdin, victim.stdout):
        if pipe is not None:
            pipe.close()
    assert sorted(_handles(data_dir)) == sorted([live.pid, victim.pid]), "precondition: the dead pid stays listed"
    assert _query(url) == 1
    _stop(live)  # no new user starts: the leaving one must prune the dead pid itself
    assert _server_pid(data_dir) is None, "a dead user's pid kept the server running after the last live one left"
    assert _handles(data_dir) == []


def test_a_data_dir_left_to_a_vanished_uid_still_starts(data_dir):
    # What concurrent first starts on a fresh machine left behind: a cluster initialised by a uid that then
    # lost the race for the server user's name (the library gives pgdata itself, not its files, to the user).
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another user")
    import pwd

    first, _ = _start_holder(data_dir)
    _stop(first)
    _wait_stopped(data_dir)
    vanished = max(entry.pw_uid for entry in pwd.getpwall() if entry.pw_uid < 60000) + 1
    subprocess.run(["chown", "-R", f"{vanished}:{vanished}", str(data_dir / "pg")], check=True)
    holder, url = _start_holder(data_dir)
    try:
        assert _query(url) == 1
    finally:
        _stop(holder)
    _wait_stopped(data_dir)


REVIVING_USER = """
import os, signal, sys, time
from pathlib import Path
from rag_service.service import build_service
data = Path(sys.argv[1])
rag = build_service()
rag.index_texts([("a.md", "A", "Backups are kept for 14 days.")], collection="kb")
answer = lambda: [c.content for c in rag.retrieve("backups kept", "search", collection="kb").chunks]
expected = answer()
killed = int((data / "pg" / "postmaster.pid").read_text().split()[0])
os.kill(killed, signal.SIGKILL)  # as the OOM killer would
while True:
    try:
        os.kill(killed, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)  # polling a condition
again = answer()
started = int((data / "pg" / "postmaster.pid").read_text().split()[0])
print(again == expected, started != killed, flush=True)
rag.close()
"""


def test_a_long_running_user_starts_the_embedded_server_again_after_its_postmaster_was_killed(data_dir):
    """`rag serve` and `rag mcp` outlive the server's death (the OOM killer, kill -9): the next call starts it again
    instead of answering 'unreachable' until some other command does."""
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_EMBEDDING_MODEL": "hashing", "RAG_RERANK_MODEL": "none"}
    env.pop("RAG_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", REVIVING_USER, str(data_dir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr
    assert "not running; starting it again" in done.stderr
