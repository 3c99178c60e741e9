"""A service made before ``fork`` (gunicorn --preload, Celery prefork, multiprocessing "fork") works in the children,
each on connections and threads of its own, and the parent keeps working after them (``rag_service.forks``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_service import onnx_runtime
from rag_service.db import parallel_search
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.db.migrate import upgrade
from rag_service.embed import HashingEmbedder
from rag_service.service import UniversalRAGService
from tests.integration.test_embedded_server import _server_pid, _wait_exited

pytestmark = pytest.mark.multiprocess

QUERIES = ["how are backups kept?", "which port does the server use?", "rotate the signing keys"]
TEXTS = [
    ("backup.md", "Backups", "Backups are kept for 14 days. Snapshots are taken every night at 2am."),
    ("server.md", "Server", "The server listens on port 8765. Set RAG_PORT to change the port it uses."),
    ("keys.md", "Keys", "Rotate the signing keys every 90 days with the rotate command; old keys stay valid."),
    ("misc.md", "Misc", "Unrelated notes about coffee, the office plants and the weekly team lunch."),
]
CHILDREN = 3
#: a child that hangs (a pool without workers, a desynchronised connection) fails the test, not the run
CHILD_TIMEOUT_S = 30


@pytest.fixture
def service(database_factory, settings, monkeypatch) -> Iterator[UniversalRAGService]:
    """A committed database of its own, the keyword arm on its second connection and thread at every search."""
    monkeypatch.setattr(parallel_search, "has_idle_core", lambda engine: True)  # the children inherit it
    url = database_factory.create("rag_fork")
    arms_at_once = dataclasses.replace(settings, parallel_arms_from=1)
    engine = make_engine(url, arms_at_once)
    try:
        upgrade(engine)
        built = UniversalRAGService(arms_at_once, database=Database(engine), embedder=HashingEmbedder(), reranker=None)
        built.index_texts(TEXTS, collection="kb")
        yield built
        built.close()
    finally:
        engine.dispose()


def signature(service: UniversalRAGService, query: str) -> list[tuple[str, int, int, float]]:
    result = service.retrieve(query, "search", collection="kb", max_chunks=3)
    assert not result.metrics.degraded, result.metrics.degraded
    return [(c.source, c.start_char, c.end_char, round(c.relevance_score, 6)) for c in result.chunks]


def _queries_in_child(service: UniversalRAGService, number: int) -> dict[str, object]:
    """What a child found: each query three times, once through ``aretrieve``'s pool, and the parallel arms' pool."""
    seen = {q: [signature(service, QUERIES[(number + n) % len(QUERIES)]) for n in range(3)] for q in QUERIES}
    pooled = asyncio.run(service.aretrieve(QUERIES[0], "search", collection="kb", max_chunks=3))
    arm_pool = parallel_search._KEYWORD_ARM_THREADS.get().submit(lambda: "ran").result(timeout=10)
    return {"seen": seen, "pooled": [(c.source, c.start_char) for c in pooled.chunks], "arm_pool": arm_pool}


def test_forked_children_query_on_their_own_connections_and_the_parent_keeps_working(service):
    expected = {q: signature(service, q) for q in QUERIES}
    asyncio.run(service.aretrieve(QUERIES[0], "search", collection="kb"))  # the parent's pool has its threads
    assert parallel_search._KEYWORD_ARM_THREADS.get().submit(lambda: "ran").result() == "ran"

    def child(number: int) -> dict[str, object]:
        return _queries_in_child(service, number)

    fork = multiprocessing.get_context("fork")
    global _CHILD
    _CHILD = child
    with fork.Pool(CHILDREN) as pool:
        found = pool.map_async(_run_child, range(CHILDREN)).get(timeout=CHILD_TIMEOUT_S)

    for number, got in enumerate(found):  # each child's answers are the parent's, query for query
        assert got["seen"] == {q: [expected[QUERIES[(number + k) % len(QUERIES)]] for k in range(3)] for q in QUERIES}
        assert got["pooled"] == [(source, start) for source, start, _, _ in expected[QUERIES[0]]]
        assert got["arm_pool"] == "ran"
    # and the parent's own connections were never touched
    assert {q: signature(service, q) for q in QUERIES} == expected
    assert parallel_search._KEYWORD_ARM_THREADS.get().submit(lambda: "ran").result(timeout=10) == "ran"


_CHILD = None


def _run_child(number: int) -> dict[str, object]:
    assert _CHILD is not None
    return _CHILD(number)


def test_a_child_of_a_process_that_loaded_onnx_runtime_is_warned_once_at_its_first_use(service, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    monkeypatch.setattr(onnx_runtime, "_loaded_quiet", False)  # as when the application imported it first
    assert "onnxruntime" in sys.modules
    signature(service, QUERIES[0])

    def child(number: int) -> dict[str, object]:
        heard: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("rag_service").addHandler(handler)
        for query in QUERIES:
            signature(service, query)
        return {"heard": heard}

    global _CHILD
    _CHILD = child
    with multiprocessing.get_context("fork").Pool(1) as pool:
        (got,) = pool.map_async(_run_child, [0]).get(timeout=CHILD_TIMEOUT_S)
    heard = got["heard"]
    assert isinstance(heard, list)
    warnings = [line for line in heard if "ONNX Runtime" in line]
    assert len(warnings) == 1, heard
    assert "sys.exit" in warnings[0] and "--preload" in warnings[0] and "\n" not in warnings[0]


ONNX_PARENT = """
import os, sys
import onnxruntime
if os.fork() == 0:
    sys.exit(0)
print(os.waitstatus_to_exitcode(os.wait()[1]))
"""


def test_with_onnx_runtime_telemetry_off_a_forked_child_exits_through_sys_exit():
    """The README's way out of ONNX Runtime's hang at a forked child's exit (its telemetry thread, 1.32)."""
    pytest.importorskip("onnxruntime")
    env = {**os.environ, "ORT_DISABLE_TELEMETRY": "1"}
    done = subprocess.run([sys.executable, "-c", ONNX_PARENT], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr


PRODUCT_PARENT = """
import os, sys
os.environ.pop("ORT_DISABLE_TELEMETRY", None)
from rag_service.onnx_runtime import load_onnxruntime
load_onnxruntime()
if os.fork() == 0:
    sys.exit(0)
print(os.waitstatus_to_exitcode(os.wait()[1]), os.environ.get("ORT_DISABLE_TELEMETRY"))
"""


def test_onnx_runtime_loaded_by_the_product_lets_a_forked_child_exit_through_sys_exit():
    """The product loads ONNX Runtime with its telemetry off (unless the environment says otherwise), so a worker
    forked after the first query (gunicorn --preload) does not hang at its exit."""
    pytest.importorskip("onnxruntime")
    done = subprocess.run([sys.executable, "-c", PRODUCT_PARENT], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["0", "None"], done.stderr  # the environment kept


FORKING_USER = """
import json, os, sys
from pathlib import Path
from rag_service.db.embedded import leave_embedded_servers
from rag_service.service import build_service

data = Path(sys.argv[1])
handles, lock_file = data / "pg" / ".handle_pids.json", data / "pg" / "postmaster.pid"
pids = lambda: sorted(json.loads(handles.read_text()))
rag = build_service()
rag.index_texts([("a.md", "A", "Backups are kept for 14 days.")], collection="kb")
answer = lambda: [c.content for c in rag.retrieve("backups kept", "search", collection="kb").chunks]
expected = answer()
assert expected and "onnxruntime" not in sys.modules  # its exit handler would hang a child's sys.exit
exit_code = lambda pid: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out = {}
pid = os.fork()
if pid == 0:  # a worker that queries and leaves through sys.exit (atexit runs) while the parent stays
    sys.exit(0 if answer() == expected and pids() == sorted([os.getppid(), os.getpid()]) else 3)
out["worker"] = [exit_code(pid), pids() == [os.getpid()], lock_file.exists(), answer() == expected]
joined, left = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:  # a daemon's child: its parent leaves first; it is a user of its own, and the last
    ok = answer() == expected
    os.write(joined[1], b"j")
    os.read(left[0], 1)
    sys.exit(0 if ok and answer() == expected and pids() == [os.getpid()] else 3)
os.read(joined[0], 1)
rag.close()
leave_embedded_servers()
out["parent_left"] = [pids() == [pid], lock_file.exists()]
os.write(left[1], b"l")
out["daemon"] = [exit_code(pid), pids(), lock_file.exists()]
print(json.dumps(out))
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A throwaway data folder; its server is stopped and its files removed after the test, whatever happened."""
    path = Path(tempfile.mkdtemp(prefix="rag_fork_", dir="/tmp"))  # short: the server's socket lives there
    yield path
    pid = _server_pid(path)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        _wait_exited(pid)
    shutil.rmtree(path, ignore_errors=True)


def test_a_forked_user_of_the_embedded_server_counts_as_its_own_and_its_exit_leaves_the_parents_entry(data_dir):
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_EMBEDDING_MODEL": "hashing", "RAG_RERANK_MODEL": "none"}
    env.pop("RAG_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", FORKING_USER, str(data_dir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["worker"] == [0, True, True, True], "a worker's exit took the parent's entry or the server"
    assert out["parent_left"] == [True, True], "the parent's leave stopped the server under its child"
    assert out["daemon"] == [0, [], False], "the last user (the child) did not stop the server"
