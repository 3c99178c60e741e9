"""SIGTERM and SIGINT stop ``rag serve``, ``rag mcp`` and ``rag reindex`` cleanly, with real signals to real processes.

Cleanly: the embedded PostgreSQL is stopped when its last user leaves (and kept while another one
lives), no pid is left in its handle list, and an interrupted reindex leaves every document in its
old or its new version and reports what it wrote. Every process waits on what it prints, never on
a sleep; a data folder under /tmp is shared by the module (one ``initdb``) and removed at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from sqlalchemy.engine import make_url

from rag_service.db.embedded import (
    joined_embedded_servers,
    leave_embedded_servers,
    start_embedded_server,
    stop_embedded_server,
)
from tests.conftest import seed_onnx_export

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

RAG = Path(sys.executable).parent / "rag"
STOPS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]
#: how long a step may take before the test gives up on it (a hang, not a timing assertion)
PATIENCE = 240


#: ``rag`` with SIGINT at its default, then exec'd (same pid). A test run started in the background by a
#: script inherits SIGINT ignored (POSIX shells ignore it for ``cmd &``); so would every child, and
#: Python then leaves SIGINT ignored: the SIGINT cases hung in a clean clone started that way.
_SIGINT_AS_A_TERMINAL_HAS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


class Rag:
    """One ``rag`` subprocess whose stderr (or stdout) is read on a thread, so the test can wait for a line."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, *, stdin: bool = False) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SIGINT_AS_A_TERMINAL_HAS_IT, str(RAG), *argv],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.pid = self.process.pid
        self.err = _Reader(self.process.stderr)
        self.out = _Reader(self.process.stdout)

    def wait_for(self, pattern: str, *, stream: str = "err") -> re.Match[str]:
        """The first match of ``pattern`` in what the process wrote to ``stream`` (waits for more output)."""
        return (self.err if stream == "err" else self.out).wait_for(pattern, self.process)

    def finish(self) -> int:
        code = self.process.wait(timeout=PATIENCE)
        self.err.done.wait(timeout=PATIENCE)
        self.out.done.wait(timeout=PATIENCE)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.err.done.wait(timeout=PATIENCE)  # the readers hit the end before their pipes close
        self.out.done.wait(timeout=PATIENCE)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


class _Reader:
    def __init__(self, stream: object) -> None:
        self.text = ""
        self.chunks: queue.Queue[str] = queue.Queue()
        self.done = threading.Event()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        fd = stream.fileno()  # type: ignore[attr-defined]
        while block := os.read(fd, 1 << 16):
            self.chunks.put(block.decode("utf-8", errors="replace"))
        self.chunks.put("")
        self.done.set()

    def wait_for(self, pattern: str, process: subprocess.Popen[bytes]) -> re.Match[str]:
        while not (found := re.search(pattern, self.text)):
            try:
                chunk = self.chunks.get(timeout=PATIENCE)
            except queue.Empty:
                raise AssertionError(f"no {pattern!r} within {PATIENCE} s in: {self.text[-2000:]}") from None
            if not chunk:
                raise AssertionError(f"exited ({process.wait()}) before {pattern!r}: {self.text[-2000:]}")
            self.text += chunk
        return found

    def all(self) -> str:
        self.done.wait(timeout=PATIENCE)
        while not self.chunks.empty():
            self.text += self.chunks.get()
        return self.text


@pytest.fixture(scope="module")
def data_dir(onnx_export: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rag_stop_", dir="/tmp"))
    seed_onnx_export(path, onnx_export)  # exported once for the run, as `rag` does on first use
    yield path
    stop_embedded_server(path)  # whatever a failed test left running
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def rag(data_dir: Path, tmp_path: Path) -> Iterator[object]:
    """Starts ``rag`` processes on ``data_dir``; any still running at the end (a failed test) is killed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"RAG_DATA_DIR": str(data_dir), "RAG_RERANK_MODEL": "none", "RAG_CHUNK_SIZE": "300"}
    env |= {"RAG_CHUNK_OVERLAP": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    started: list[Rag] = []

    def start(*argv: str, stdin: bool = False) -> Rag:
        process = Rag(list(argv), env, tmp_path, stdin=stdin)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def _postmaster(data_dir: Path) -> int | None:
    with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
        return int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
    return None


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _handles(data_dir: Path) -> list[int]:
    return [int(p) for p in json.loads((data_dir / "pg" / ".handle_pids.json").read_text() or "[]")]


def _assert_left_cleanly(data_dir: Path, server: int) -> None:
    """The embedded server stopped with its last user, and no pid stayed behind."""
    assert not _running(server), "the embedded PostgreSQL outlived its last user"
    assert _postmaster(data_dir) is None
    assert _handles(data_dir) == []


def _serving(rag: object) -> Rag:
    serve: Rag = rag("serve", "--port", "0")  # type: ignore[operator]
    serve.wait_for(r"rag serve: http://127\.0\.0\.1:\d+/")
    return serve


@pytest.mark.parametrize("stop", STOPS)
def test_rag_serve_stops_on_signal_and_takes_the_embedded_server_with_it(rag, data_dir, stop) -> None:
    serve = _serving(rag)
    server = _postmaster(data_dir)
    assert server is not None and _running(server)
    assert _handles(data_dir) == [serve.pid]
    serve.process.send_signal(stop)
    assert serve.finish() == 0, serve.err.all()  # a service asked to stop, stopped: success
    assert "rag serve: stopped" in serve.err.all()
    _assert_left_cleanly(data_dir, server)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


@pytest.mark.parametrize("stop", STOPS)
def test_rag_mcp_stops_on_signal_while_its_client_is_silent(rag, data_dir, stop) -> None:
    mcp: Rag = rag("mcp", stdin=True)
    assert mcp.process.stdin is not None
    mcp.process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    mcp.process.stdin.flush()
    mcp.wait_for(r'"id":\s*1,\s*"result"', stream="out")
    server = _postmaster(data_dir)
    assert server is not None and _handles(data_dir) == [mcp.pid]
    mcp.process.send_signal(stop)  # stdin stays open: the client says nothing more
    assert mcp.finish() == 0, mcp.err.all()
    _assert_left_cleanly(data_dir, server)


def test_the_server_stays_while_a_user_lives_and_a_killed_user_does_not_keep_it(rag, data_dir) -> None:
    serve = _serving(rag)
    server = _postmaster(data_dir)
    assert server is not None
    status: Rag = rag("db", "status")  # a second user comes and goes
    assert status.finish() == 0, status.err.all()
    assert _postmaster(data_dir) == server and _running(server), "a leaving user stopped a server still in use"
    assert _handles(data_dir) == [serve.pid]
    killed: Rag = rag("mcp", stdin=True)  # a third user, killed with -9: it cannot unregister
    assert killed.process.stdin is not None
    killed.process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    killed.process.stdin.flush()
    killed.wait_for(r'"result"', stream="out")
    assert sorted(_handles(data_dir)) == sorted([serve.pid, killed.pid])
    killed.kill()
    assert _running(server)
    serve.process.send_signal(signal.SIGTERM)
    assert serve.finish() == 0, serve.err.all()
    _assert_left_cleanly(data_dir, server)  # the dead pid was pruned when the last live user left


def _catches(pid: int, stop: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler for ``stop`` (its SigCgt mask): ``rag`` sets its own first in main()."""
    with contextlib.suppress(FileNotFoundError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (stop - 1) & 1)
    return False


#: when a cold ``rag query`` is stopped, counted from its main(): the parser, the model and database threads
#: starting, the service's imports, the database's start (~1 s in all on 2 busy cores)
EARLY_STOPS = [n * 0.04 for n in range(16)]
#: how long a stopped query may take to exit (its threads finish their step first: ~1 s); a hang is far longer
STOPPED_WITHIN = 15


@pytest.mark.parametrize("stop", STOPS)
def test_a_cold_query_stopped_in_its_first_moments_exits_promptly_without_a_traceback(
    rag, data_dir, tmp_path, stop
) -> None:
    # a stop raised inside importlib's code left an import lock held: the query's threads then waited on it
    # forever, and the query on them (4 of 8 SIGINTs in its first 0.5 s); one while the parser was built
    # printed a traceback
    note = tmp_path / "backups.md"
    note.write_text("# Backups\n\nBackups run every night and are kept for a week, then pruned.\n")
    indexed: Rag = rag("reindex", str(note), "--collection", "cold", "--quiet")
    assert indexed.finish() == 0, indexed.err.all()
    word = "interrupted" if stop == signal.SIGINT else "terminated"
    for delay in EARLY_STOPS:
        query: Rag = rag("query", "how are backups kept?", "--collection", "cold")
        while not _catches(query.pid, signal.SIGTERM):  # main() has begun: the interpreter's own start is over
            assert query.process.poll() is None, query.err.all()
            time.sleep(0.001)
        time.sleep(delay)
        query.process.send_signal(stop)
        try:
            code = query.process.wait(timeout=STOPPED_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"rag query hung after {stop.name} {delay:.2f} s into main()")
        stderr = query.err.all()
        if code == 0:  # it answered before the signal came
            continue
        assert (code, stderr) == (128 + stop, f"{word}\n"), f"{stop.name} {delay:.2f} s into main()"
        assert _postmaster(data_dir) is None and _handles(data_dir) == [], "the embedded server outlived the query"


# -- an interrupted reindex ------------------------------------------------------------------------

DOCUMENTS = 260  # version 2 is ~3 embedding batches of 1,024 chunks, so a stop lands between batches
SENTENCES = 40


def _old(n: int) -> str:
    return f"Document {n} in its first version holds one sentence about topic {n}.\n"


def _new(n: int) -> str:
    return "".join(
        f"Document {n}, second version, sentence {s}: the {s}th remark on subject {n * 97 + s}.\n"
        for s in range(SENTENCES)
    )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _stored(data_dir: Path, collection: str) -> dict[str, tuple[str, str, list[str]]]:
    """source -> (content hash, content, chunk texts) of the collection, read through the embedded server."""
    keep = joined_embedded_servers()
    url = make_url(start_embedded_server(data_dir))
    try:
        with psycopg.connect(
            host=url.query["host"], port=url.query["port"], user="postgres", dbname=url.database
        ) as conn:
            rows = conn.execute(
                "SELECT d.source, d.content_hash, d.content, array_agg(c.content ORDER BY c.chunk_index) "
                "FROM documents d LEFT JOIN document_chunks c ON c.collection = d.collection AND c.document_id = d.id "
                "WHERE d.collection = %s GROUP BY d.collection, d.id",
                (collection,),
            ).fetchall()
    finally:
        leave_embedded_servers(keep=keep)
    return {source: (digest, content, [c for c in chunks if c is not None]) for source, digest, content, chunks in rows}


@pytest.mark.parametrize("stop", STOPS)
def test_an_interrupted_reindex_leaves_each_document_old_or_new_and_says_what_it_wrote(
    rag, data_dir, tmp_path, stop
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / ".git").mkdir()  # sources relative to the corpus
    collection = f"stop_{stop.name.lower()}"
    for n in range(DOCUMENTS):
        (corpus / f"doc{n:03d}.txt").write_text(_old(n))
    first: Rag = rag("reindex", str(corpus), "--collection", collection)
    assert first.finish() == 0, first.err.all()
    for n in range(DOCUMENTS):
        (corpus / f"doc{n:03d}.txt").write_text(_new(n))

    second: Rag = rag("reindex", str(corpus), "--collection", collection)
    second.wait_for(rf"\b([1-9]\d*)/{DOCUMENTS} docs")  # a progress line (stderr is a pipe): a first batch is written
    server = _postmaster(data_dir)
    assert server is not None
    second.process.send_signal(stop)
    code = second.finish()
    stderr, stdout = second.err.all(), second.out.all()
    assert code == 128 + stop, stderr
    word = "interrupted" if stop == signal.SIGINT else "terminated"
    assert f"{word} by {stop.name}: the documents counted above are written" in stderr
    _assert_left_cleanly(data_dir, server)

    stored = _stored(data_dir, collection)
    assert sorted(stored) == [f"doc{n:03d}.txt" for n in range(DOCUMENTS)], "a document was lost"
    new = 0
    for source, (digest, content, chunks) in stored.items():
        n = int(source[3:6])
        assert digest in (_sha(_old(n)), _sha(_new(n))), f"{source} is neither version"
        assert content in (_old(n), _new(n)) and _sha(content) == digest
        assert chunks and all(c.strip() in content for c in chunks), f"{source}: chunks of another version"
        new += digest == _sha(_new(n))
    assert 0 < new < DOCUMENTS, f"precondition: the stop came mid-run ({new} of {DOCUMENTS} new)"
    reported = re.search(r"collection '[^']+': 0 added, (\d+) updated, 0 unchanged", stdout)
    assert reported is not None, stdout
    assert int(reported[1]) == new, f"the report says {reported[1]} updated, the database holds {new} new"
    # its chunks add up to what it wrote: vectors looked up or embedded for documents the stop left unwritten are
    # not counted (it once said "5643 written (0 embedded, 7320 reused vectors)")
    chunks = re.search(r"chunks: (\d+) written \((\d+) embedded, (\d+) reused vectors\)", stdout)
    assert chunks is not None, stdout
    written, embedded, reused = (int(g) for g in chunks.groups())
    new_chunks = sum(len(c) for source, (digest, _, c) in stored.items() if digest == _sha(_new(int(source[3:6]))))
    assert written == embedded + reused == new_chunks, (stdout, new_chunks)
