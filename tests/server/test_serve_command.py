"""``rag serve`` as a user starts it: a process of its own, configured by the environment."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.conftest import DatabaseFactory, seed_onnx_export
from tests.server.test_warm_start import wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


SERVING_ON = re.compile(r"rag serve: http://127\.0\.0\.1:(\d+)/ ")


@contextmanager
def _refusing_port() -> Iterator[int]:
    """A port bound here but not listening: connections are refused, and no one else can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    """Pass ``stream``'s lines on, then ``""`` at its end."""
    for line in stream:
        lines.put(line)
    lines.put("")


def _bound_port(process: subprocess.Popen[str], lines: queue.Queue[str], seen: list[str]) -> int:
    """The port ``rag serve --port 0`` bound (listening before it prints), from its start-up line; everything read
    lands in ``seen``."""
    while True:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            raise AssertionError(f"rag serve did not start within 120 s: {seen}") from None
        seen.append(line)
        if not line:
            raise AssertionError(f"rag serve exited ({process.wait()}): {''.join(seen)}")
        if found := SERVING_ON.search(line):
            return int(found[1])


def test_rag_serve_says_read_only_and_serves(
    database_factory: DatabaseFactory, onnx_export: Path, tmp_path: Path
) -> None:
    seed_onnx_export(tmp_path, onnx_export)  # exported once for the run, as `rag` does on first use
    url = database_factory.create("rag_serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"RAG_DATABASE_URL": url, "RAG_DATA_DIR": str(tmp_path), "RAG_RERANK_MODEL": "none"}
    rag = Path(sys.executable).parent / "rag"
    migrate = subprocess.run([rag, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120)
    assert migrate.returncode == 0, migrate.stderr
    # port 0: the kernel picks a free port when `rag serve` binds it, and its start-up line names it
    process = subprocess.Popen(
        [rag, "serve", "--port", "0", "--log-level", "info"], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(process.stderr, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        port = _bound_port(process, lines, seen)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/healthz").status_code == 200
        assert wait_ready(base)[-1] == 200  # 503 "warming up" while the embedding model loads
        assert httpx.get(f"{base}/readyz").json() == {"status": "ready"}
        write = httpx.post(f"{base}/api/documents", json={"documents": [{"source": "a.txt", "text": "x" * 60}]})
        assert write.status_code == 403
        answer = httpx.post(f"{base}/api/rag/retrieve", json={"query": "anything at all"}, timeout=60)
        # an empty database: the collection asked for does not exist, said in one JSON message
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_collection"
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=30)
        process.stderr.close()
    while not lines.empty():
        seen.append(lines.get())
    stderr = "".join(seen)
    assert "RAG_API_TOKEN is not set, so this server is read-only" in stderr
    # uvicorn shuts down cleanly on SIGTERM, and a service asked to stop that stopped exits 0
    assert process.returncode == 0, stderr


def test_rag_serve_without_a_database_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    rag = Path(sys.executable).parent / "rag"
    with _refusing_port() as port:
        env["RAG_DATABASE_URL"] = f"postgresql+psycopg://nobody@127.0.0.1:{port}/none?connect_timeout=2"
        done = subprocess.run(
            [rag, "serve", "--port", "0"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr


def test_rag_serve_on_a_port_in_use_or_no_port_is_one_line(tmp_path: Path) -> None:
    """A port another process listens on: one line naming it and the fix, before any model or database work (no
    database is configured here); a number that is no port: the usage error. Neither hangs nor prints a trace."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["RAG_DATABASE_URL"] = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    rag = Path(sys.executable).parent / "rag"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = int(taken.getsockname()[1])
        done = subprocess.run(
            [rag, "serve", "--port", str(port)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1 and done.stderr == (
        f"error: rag serve cannot listen on 127.0.0.1:{port} (address already in use); stop what uses it or pick "
        "another --port (0: any free port) or --host\n"
    )
    for wrong in ("99999", "-1", "http"):
        done = subprocess.run(
            [rag, "serve", "--port", wrong], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (wrong, done.stderr)
        assert done.stderr.endswith(f"argument --port: {wrong!r} is no port: use 1-65535, or 0 for any free port\n")
