"""The ``rag`` command as a user runs it: exit codes, one-line errors, JSON output, reindex report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rag_service.db.shared_memory import THP_HUGE_MODES, local_shmem_thp
from tests.conftest import seed_onnx_export

pytestmark = pytest.mark.multiprocess


def cli_environment(url: str, data_dir: Path) -> dict[str, str]:
    """This process's environment for ``rag`` on database ``url``: the hashing embedder, no reranker."""
    env = dict(os.environ)
    env.update(RAG_DATABASE_URL=url, RAG_EMBEDDING_MODEL="hashing", RAG_RERANK_MODEL="none", RAG_DATA_DIR=str(data_dir))
    return env


@pytest.fixture
def cli_env(database_factory, tmp_path) -> dict[str, str]:
    return cli_environment(database_factory.create("rag_cli"), tmp_path / "data")


def rag(
    env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rag_service.cli", *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_db_upgrade_status_reindex_query(cli_env, tmp_path):
    status = rag(cli_env, "db", "status")
    assert status.returncode == 1 and "run `rag db upgrade`" in status.stdout
    upgraded = rag(cli_env, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "(head " in upgraded.stdout and "run `rag db upgrade`" not in upgraded.stdout

    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nAlpha explains how nightly backups are restored from cold storage.\n")
    (docs / "bad.txt").write_bytes(b"\xff\xfe not utf-8 at all, sorry")
    indexed = rag(cli_env, "reindex", "docs", "--collection", "kb", "--quiet", cwd=tmp_path)
    assert indexed.returncode == 1, "a failed file makes the run exit 1"
    assert "1 added" in indexed.stdout and "failed: docs/bad.txt" in indexed.stdout
    assert "Traceback" not in indexed.stderr

    answer = rag(cli_env, "query", "how are backups restored?", "--collection", "kb", "--json")
    assert answer.returncode == 0, answer.stderr
    payload = json.loads(answer.stdout)
    assert payload["chunks"][0]["source"] == "docs/a.md"
    assert set(payload["metrics"]) >= {"embedding_time_ms", "retrieval_time_ms", "total_time_ms", "degraded"}

    text_answer = rag(cli_env, "query", "backups", "--collection", "kb", "--context", "agent")
    assert text_answer.returncode == 0 and "[1] docs/a.md" in text_answer.stdout
    overrides = ("--set", "max_tokens=40", "--set", 'filters={"source_prefix": "docs/"}')
    budgeted = json.loads(rag(cli_env, "query", "backups", "--collection", "kb", *overrides, "--json").stdout)
    assert budgeted["chunks"][0]["source"] == "docs/a.md" and 0 < budgeted["total_tokens"] <= 40
    starved = rag(cli_env, "query", "backups", "--collection", "kb", "--set", "max_tokens=5")
    assert starved.stdout.strip() == "(no result fits: see the degraded line)"
    assert "-- degraded: format: max_tokens 5 holds none of the 1 results" in starved.stderr

    again = rag(cli_env, "reindex", "docs/a.md", "--collection", "kb", "--json", "--quiet", cwd=tmp_path)
    assert json.loads(again.stdout)["unchanged"] == 1

    everything = rag(cli_env, "reindex", "--all", "--collection", "kb", "--quiet", cwd=tmp_path)
    assert everything.returncode == 0 and "1 updated" in everything.stdout

    status = rag(cli_env, "db", "status").stdout.splitlines()
    memory = [line for line in status if line.startswith("memory:")]  # the server's own, read from it
    mode = local_shmem_thp()  # the test's server runs here: the line names this kernel's transparent pages
    pages = rf"transparent huge pages \(shmem_enabled = {mode}\)" if mode in THP_HUGE_MODES else "(4 kB|huge) pages"
    assert len(memory) == 1 and re.fullmatch(rf"memory: +shared_buffers \d+[kMG]B on {pages}", memory[0])
    sizes = [line for line in status if line.startswith("size:")]
    named = {line.split()[1]: line for line in sizes}  # issue 23.7d: the README says status shows them
    assert "(index hnsw): " in named["ix_document_chunks_embedding_hnsw"]
    assert not named["ix_document_chunks_embedding_hnsw"].endswith(" 0 bytes")
    assert "(index gin): " in named["ix_document_chunks_content_tsv"] and "(table): " in named["document_chunks"]
    assert "chunk_terms" in named and all(line.endswith(("bytes", "kB", "MB", "GB")) for line in sizes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("query", ""), "error: query is empty"),
        (("query", "x", "--context", "nope"), "error: unknown context 'nope'; valid contexts: chatbot"),
        (("query", "x", "--context", "Agent"), "error: unknown context 'Agent'; did you mean 'agent'? valid contexts"),
        (("query", "x", "--max-chunks", "-3"), "error: max_chunks (-3) must be between 1 and 1000"),
        (("query", "x", "--set", "max_token=5"), "error: unknown override(s) max_token; did you mean max_tokens?"),
        (
            ("query", "x", "--collection", "alpha", "--set", "collection=beta"),
            "error: --set collection=beta: collection is not a preset override; use --collection beta",
        ),
        (("query", "x", "--set", "context=search"), "error: --set context=search: context is not a preset override; "),
        (("query", "x", "--set", "query=foo"), "error: --set query=foo: query is not a preset override; give the"),
        (("reindex", ".", "--collection", ""), "error: collection name '' must be 1-200 characters, not blank"),
    ],
)
def test_user_errors_are_one_line_exit_1(cli_env, args, message):
    assert rag(cli_env, "db", "upgrade").returncode == 0
    result = rag(cli_env, *args)
    assert result.returncode == 1
    assert result.stderr.strip().startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_usage_errors_exit_2(cli_env):
    assert rag(cli_env, "frobnicate").returncode == 2
    assert rag(cli_env, "reindex").returncode == 2


def test_unreachable_database_is_one_line_with_masked_password(cli_env):
    cli_env["RAG_DATABASE_URL"] = "postgresql://user:hunter2@127.0.0.1:9/none"
    result = rag(cli_env, "db", "status")
    assert result.returncode == 1
    assert "hunter2" not in result.stderr and "***" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_model_mismatch_is_refused(cli_env, onnx_export, tmp_path):
    seed_onnx_export(Path(cli_env["RAG_DATA_DIR"]), onnx_export)  # the model loads before the refusal: no export
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / "n.txt").write_text("Some notes about the retrieval service and its database guard. " * 2)
    assert rag(cli_env, "reindex", "n.txt", "--quiet", cwd=tmp_path).returncode == 0
    cli_env["RAG_EMBEDDING_MODEL"] = "all-MiniLM-L6-v2"
    result = rag(cli_env, "query", "guard")
    assert result.returncode == 1
    assert "holds vectors of 'test/hashing-embedder'" in result.stderr


def test_graph_build_backfills_edges(cli_env, tmp_path):
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / ".git").mkdir()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nAlpha explains how nightly backups are restored, see [beta](b.md).\n")
    (docs / "b.md").write_text("# Beta\n\nBeta explains where the nightly backups are kept and for how long.\n")
    assert rag(cli_env, "reindex", "docs", "--collection", "kb", "--quiet", cwd=tmp_path).returncode == 0
    built = rag(cli_env, "graph", "build", "--collection", "kb", "--json")
    assert built.returncode == 0, built.stderr
    report = json.loads(built.stdout)
    assert report["collections"] == ["kb"] and report["documents"] == 2 and report["edges_written"] >= 2
    every = rag(cli_env, "graph", "build")
    assert every.returncode == 0 and "graph of 'kb': 2 documents" in every.stdout


def test_a_reader_that_left_is_no_traceback(cli_env):
    """`rag ... | head`: the pipe's reader is gone before the command writes (its read end closed first)."""
    assert rag(cli_env, "db", "upgrade").returncode == 0
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rag_service.cli", "db", "status"],
            env=cli_env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 128 + signal.SIGPIPE


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_an_answer_stdout_cannot_encode_is_escaped_not_a_traceback(cli_env, tmp_path, encoding):
    """Audit 54a (13): on a latin-1 or cp1252 console a Cyrillic answer, or the citation line's '—', raised
    UnicodeEncodeError from print(): a traceback instead of the answer."""
    assert rag(cli_env, "db", "upgrade").returncode == 0
    (tmp_path / "ru.md").write_text("# Руководство\n\nБазы данных копируются ежедневно в два часа ночи.\n")
    assert rag(cli_env, "reindex", str(tmp_path / "ru.md"), "--collection", "kb", "--quiet").returncode == 0
    env = {**cli_env, "PYTHONIOENCODING": encoding}
    for extra in ((), ("--json",)):
        command = [sys.executable, "-m", "rag_service.cli", "query", "копируются", "--collection", "kb", *extra]
        done = subprocess.run(command, env=env, capture_output=True, timeout=120)
        stdout, stderr = done.stdout.decode(encoding), done.stderr.decode(encoding)
        assert done.returncode == 0 and "Traceback" not in stderr, stderr
        assert "\\u043a\\u043e\\u043f\\u0438\\u0440\\u0443\\u044e\\u0442\\u0441\\u044f" in stdout  # 'копируются'


def test_a_documents_terminal_escapes_are_shown_not_run(cli_env, tmp_path):
    """Audit 54b (9): rag query printed a document's OSC 52 (clipboard), title, clear-screen and concealed-text
    sequences, and its file name's, raw to the terminal."""
    assert rag(cli_env, "db", "upgrade").returncode == 0
    clipboard = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUveCB8IHNo\x07"
    text = f"# Backups\n\nThe backups page {clipboard}\x1b[2J hides \x1b[8mIGNORE THIS\x1b[0m and \x9b31m text.\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ansi\x1b[31m.md").write_text(text)
    indexed = rag(cli_env, "reindex", str(tmp_path / "docs"), "--collection", "kb")
    assert indexed.returncode == 0, indexed.stderr
    found = rag(cli_env, "query", "backups page", "--collection", "kb")
    assert found.returncode == 0, found.stderr
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", found.stdout), repr(found.stdout)
    assert "ansi\\x1b[31m.md" in found.stdout  # its file name too
    assert "\\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUveCB8IHNo\\x07\\x1b[2J hides \\x1b[8mIGNORE THIS\\x1b[0m" in found.stdout
    assert "\\x9b31m text." in found.stdout
    as_json = rag(cli_env, "query", "backups page", "--collection", "kb", "--json")
    assert clipboard in json.loads(as_json.stdout)["formatted_context"]  # data for programs, as stored
