"""``rag serve`` is warm when ``/readyz`` says ready: the model loaded and ran once, and it never loaded torch."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.conftest import DatabaseFactory, seed_onnx_export
from tests.timing import collector_paused

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.timing]

SERVING_ON = re.compile(r"rag serve: http://127\.0\.0\.1:(\d+)/ ")


def _lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)
    lines.put("")


def _port(lines: queue.Queue[str]) -> int:
    seen: list[str] = []
    while line := lines.get(timeout=120):
        seen.append(line)
        if found := SERVING_ON.search(line):
            return int(found[1])
    raise AssertionError(f"rag serve exited: {''.join(seen)}")


def wait_ready(base: str) -> list[int]:
    """Poll ``/readyz`` as a load balancer does until it answers 200; the statuses seen, in order."""
    statuses: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        statuses.append(httpx.get(f"{base}/readyz", timeout=30).status_code)
        if statuses[-1] == 200:
            return statuses
        time.sleep(0.02)
    raise AssertionError(f"/readyz never said ready: {statuses[-5:]}")


def test_the_first_retrieve_after_ready_is_as_fast_as_the_tenth(
    database_factory: DatabaseFactory, onnx_export: Path, tmp_path: Path
) -> None:
    seed_onnx_export(tmp_path, onnx_export)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"RAG_DATABASE_URL": database_factory.create("rag_warm"), "RAG_DATA_DIR": str(tmp_path)}
    env |= {"RAG_RERANK_MODEL": "none"}
    rag = Path(sys.executable).parent / "rag"
    migrate = subprocess.run([rag, "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120)
    assert migrate.returncode == 0, migrate.stderr
    (tmp_path / "docs").mkdir()  # a search of a collection that holds nothing is an error (404) now
    (tmp_path / "docs" / "vacuum.md").write_text("# Vacuum\n\nVacuum reclaims the space of dead rows.\n")
    index = subprocess.run([rag, "reindex", "docs", "--quiet"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert index.returncode == 0, index.stderr
    process = subprocess.Popen([rag, "serve", "--port", "0"], env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stderr, lines), daemon=True).start()
    try:
        base = f"http://127.0.0.1:{_port(lines)}"
        wait_ready(base)
        seconds = []
        answers = []
        with collector_paused():  # the server's time, not this process's collector
            for i in range(10):  # a new question each time: no query-vector cache hit
                started = time.perf_counter()
                answers.append(
                    httpx.post(f"{base}/api/rag/retrieve", json={"query": f"vacuum question {i}"}, timeout=60)
                )
                seconds.append(time.perf_counter() - started)
        for answer in answers:
            assert answer.status_code == 200, answer.text
            assert answer.json()["metrics"]["degraded"] == []
        maps = Path(f"/proc/{process.pid}/maps").read_text()
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stderr.close()
    # without the warm-up the first call loads the model: 10-100x the others, not within 3x
    assert seconds[0] <= 3 * max(seconds[1:]), seconds
    assert "onnxruntime" in maps and "libtorch" not in maps, "the server loaded torch"
