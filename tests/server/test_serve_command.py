"""``rag serve`` as a user starts it: a process of its own, configured by the environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import DatabaseFactory

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_rag_serve_says_read_only_and_serves(database_factory: DatabaseFactory, tmp_path: Path) -> None:
    url = database_factory.create("rag_serve")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"RAG_DATABASE_URL": url, "RAG_DATA_DIR": str(tmp_path), "RAG_RERANK_MODEL": "none"}
    rag = Path(sys.executable).parent / "rag"
    migrate = subprocess.run([rag, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120)
    assert migrate.returncode == 0, migrate.stderr
    process = subprocess.Popen(
        [rag, "serve", "--port", str(port)], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.2)
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/readyz").json() == {"status": "ready"}
        write = httpx.post(f"{base}/api/documents", json={"documents": [{"source": "a.txt", "text": "x" * 60}]})
        assert write.status_code == 403
        answer = httpx.post(f"{base}/api/rag/retrieve", json={"query": "anything at all"}, timeout=60)
        assert answer.status_code == 200 and answer.json()["result"]["chunks"] == []
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "RAG_API_TOKEN is not set, so this server is read-only" in stderr
    # uvicorn shuts down cleanly, then re-raises the SIGTERM it caught, so the exit says "terminated"
    assert process.returncode in (0, -signal.SIGTERM), stderr


def test_rag_serve_without_a_database_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["RAG_DATABASE_URL"] = f"postgresql+psycopg://nobody@127.0.0.1:{_free_port()}/none?connect_timeout=2"
    rag = Path(sys.executable).parent / "rag"
    done = subprocess.run([rag, "serve", "--port", "0"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
