"""The bundled MiniLM on ONNX Runtime: torch's vectors, no torch to query, a said fallback, kept-apart int8."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag_service import embed_onnx
from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import (
    BUNDLED_MINILM_ID,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_id,
    stop_model_exports,
)
from rag_service.embed_onnx import OnnxEmbedder, ensure_export, stop_exports
from rag_service.errors import EmbeddingMismatchError
from rag_service.ingest.indexer import Indexer
from rag_service.service import UniversalRAGService
from tests.conftest import seed_onnx_export
from tests.shared_data import scifact_dir

TEXTS = ["Which environment variable selects the reranking model?", "a", "Ünïcode, emoji 🙂 and\ttabs"]


@pytest.mark.slow
def test_onnx_vectors_are_torchs(onnx_export: Path) -> None:
    with (scifact_dir() / "corpus.jsonl").open() as corpus:
        abstracts = [json.loads(line)["text"] for line, _ in zip(corpus, range(40), strict=False)]
    texts = TEXTS + abstracts  # long abstracts are truncated at 256 tokens by both
    torch_vectors = SentenceTransformerEmbedder().embed_documents(texts)
    onnx = OnnxEmbedder(onnx_export, model_id=BUNDLED_MINILM_ID, batch_size=16)
    cosines = np.sum(torch_vectors * onnx.embed_documents(texts), axis=1)
    assert cosines.min() >= 0.999, cosines
    query = onnx.embed_query(TEXTS[0])  # short: the one-thread session
    assert query.shape == (384,) and float(query @ torch_vectors[0]) >= 0.999
    long_query = onnx.embed_query(abstracts[0])  # over QUERY_ONE_THREAD_TOKENS: the threaded session
    assert float(long_query @ torch_vectors[len(TEXTS)]) >= 0.999


@pytest.mark.slow
def test_torch_and_onnx_models_read_the_same_window(onnx_export: Path) -> None:
    """Chunks are cut to the window and unreadable text is told by it (``model_window``): both backends agree."""
    texts = [*TEXTS, "全量备份 and backups", "ระบบจะสำรองข้อมูล", "Базы данных копируются ежедневно"]
    torch_window = SentenceTransformerEmbedder().window()
    onnx_window = OnnxEmbedder(onnx_export, model_id=BUNDLED_MINILM_ID).window()
    assert torch_window is not None and torch_window.unknown is not None and onnx_window.unknown is not None
    assert torch_window.max_tokens == onnx_window.max_tokens == 256
    assert torch_window.count(texts) == onnx_window.count(texts)
    assert torch_window.unknown(texts) == onnx_window.unknown(texts)
    assert onnx_window.unknown(texts)[-3:] == [4 / 14, 1.0, 0.0]  # of the characters but spaces


@pytest.mark.slow
def test_an_int8_vector_does_not_depend_on_its_batch(onnx_export: Path) -> None:
    """int8 scales each activation tensor by the whole batch's range: a text beside others (and the padding to the
    longest) came out at a cosine of ~0.994 to itself alone, and a query is always embedded alone."""
    with (scifact_dir() / "corpus.jsonl").open() as corpus:
        abstracts = [json.loads(line)["text"] for line, _ in zip(corpus, range(12), strict=False)]
    texts = [*TEXTS, *abstracts]
    int8 = OnnxEmbedder(onnx_export, model_id=bundled_model_id("onnx-int8"), precision="int8", batch_size=16)
    together = int8.embed_documents(texts)
    alone = np.stack([int8.embed_documents([t])[0] for t in texts])
    reversed_batch = int8.embed_documents(texts[::-1])[::-1]
    assert np.array_equal(together, alone) and np.array_equal(together, reversed_batch)
    assert np.array_equal(together[0], int8.embed_query(TEXTS[0]))


_RETRIEVE = """
import json, sys
from rag_service.service import build_service
service = build_service()
text = "Vacuum reclaims space; replication slots keep WAL."
report = service.index_texts([("n.md", "Notes", text)], collection="default")
result = service.retrieve("what keeps WAL?", "workflow")
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "transformers", "sentence_transformers"})
print(json.dumps({"added": report.added, "chunks": len(result.chunks), "degraded": result.metrics.degraded,
                  "onnx": "onnxruntime" in sys.modules, "heavy": heavy}))
service.close()
"""


@pytest.mark.slow
def test_index_and_retrieve_run_without_torch(database_factory, settings, onnx_export: Path, tmp_path: Path) -> None:
    url = database_factory.create("rag_onnx")
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    engine.dispose()
    seed_onnx_export(tmp_path / "data", onnx_export)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env |= {"RAG_DATABASE_URL": url, "RAG_DATA_DIR": str(tmp_path / "data")}
    env["RAG_RERANK_MODEL"] = "none"
    done = subprocess.run([sys.executable, "-c", _RETRIEVE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"added": 1, "chunks": 1, "degraded": [], "onnx": True, "heavy": []}


@pytest.mark.slow
def test_a_failed_export_falls_back_to_torch_and_says_so(fresh_database: Database, settings, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "embed-onnx").write_text("not a folder: the export cannot be written")
    settings = replace(settings, data_dir=tmp_path, rerank_model="none", embedding_backend="onnx")
    service = UniversalRAGService(settings, database=fresh_database, reranker=None)
    report = service.index_texts(
        [("n.md", "Notes", "Vacuum reclaims space; replication slots keep WAL.")], collection="default"
    )
    assert report.added == 1
    assert [line for line in report.degraded if line.startswith("embed: ONNX embedding model unavailable")]
    result = service.retrieve("what keeps WAL?", "workflow")
    assert len(result.chunks) == 1
    notes = [line for line in result.metrics.degraded if line.startswith("embed: ")]
    assert len(notes) == 1 and "embedding on torch" in notes[0] and "RAG_EMBEDDING_BACKEND" in notes[0], notes


def test_torch_and_onnx_share_the_stored_model_but_int8_is_kept_apart(fresh_database: Database, settings) -> None:
    indexed = Indexer(fresh_database, HashingEmbedder(model_id=BUNDLED_MINILM_ID), settings)
    assert indexed.index_texts([("a.md", "A", "some text to store a vector for")], collection="default").added == 1
    for backend in ("onnx", "torch"):  # no model is loaded: the bundled embedder is lazy
        UniversalRAGService(replace(settings, embedding_backend=backend), database=fresh_database)
    assert bundled_model_id("onnx-int8") != BUNDLED_MINILM_ID
    with pytest.raises(EmbeddingMismatchError, match=r"RAG_EMBEDDING_BACKEND give .*\+onnx-int8"):
        UniversalRAGService(replace(settings, embedding_backend="onnx-int8"), database=fresh_database)


def _start_export(cache: Path) -> tuple[threading.Thread, list[BaseException]]:
    """``ensure_export`` of the bundled model into ``cache`` on a thread, as the warm-up runs it; what it raised."""
    from rag_service.embed import bundled_model_path

    failure: list[BaseException] = []

    def export() -> None:
        try:
            ensure_export(bundled_model_path(), cache)
        except BaseException as exc:  # what the warm-up would report
            failure.append(exc)

    thread = threading.Thread(target=export)
    thread.start()
    return thread, failure


def _the_export_child() -> tuple[subprocess.Popen[bytes], Path]:
    """The one export child running, and its temporary folder, once it has started."""
    for _ in range(6000):
        children = dict(embed_onnx._EXPORTS)
        if children:
            assert len(children) == 1
            ((child, workdir),) = children.items()
            assert child.pid != os.getpid() and workdir.is_dir()
            return child, workdir
        time.sleep(0.01)
    raise AssertionError("the export child never started")


def _state(pid: int) -> str:
    """The process state letter of ``pid`` (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_stop_during_the_first_export_ends_its_child_and_leaves_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export runs in a child process that ``stop_exports`` (an exit handler, ``service.close``) ends, and what
    it wrote is removed; it says first that it runs (a warning: a first query waits for it). The child stops
    itself before it exports (SIGSTOP, as a job suspended with Ctrl-Z), so it cannot finish before the stop
    comes: a SIGINT that came during a real export's last steps once let it finish (exit 0, CI after session
    48); a stopped child ends too."""
    stop_first = "import os, signal; os.kill(os.getpid(), signal.SIGSTOP); "
    monkeypatch.setattr(embed_onnx, "_EXPORT_CHILD", stop_first + embed_onnx._EXPORT_CHILD)
    cache = tmp_path / "embed-onnx"
    thread, failure = _start_export(cache)
    child, workdir = _the_export_child()
    for _ in range(6000):
        if _state(child.pid) == "T":
            break
        time.sleep(0.01)
    assert _state(child.pid) == "T"
    (workdir / "traced.onnx").write_bytes(b"half a graph")  # what the export had written so far
    said = [r.getMessage() for r in caplog.records if r.name == "rag_service.embed_onnx"]
    assert said == [f"preparing the embedding model once for {cache} (an ONNX export, ~15 s)"], said
    stop_exports()
    thread.join(60)
    assert not thread.is_alive()
    assert child.returncode == -signal.SIGTERM  # ended by the stop, not killed after the wait
    assert failure and "exporting" in str(failure[0]) and "exit -15" in str(failure[0]), failure
    assert list(cache.iterdir()) == [], "the stopped export left files behind"


def test_an_export_child_that_ignores_the_stop_is_killed_and_its_folder_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that does not end on SIGTERM is killed after ``_EXPORT_STOP_WAIT_S``; its folder goes all the same."""
    monkeypatch.setattr(
        embed_onnx,
        "_EXPORT_CHILD",
        "import signal, sys, time; from pathlib import Path; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "(Path(sys.argv[3]) / 'traced.onnx').write_bytes(b'half'); time.sleep(120)",
    )
    monkeypatch.setattr(embed_onnx, "_EXPORT_STOP_WAIT_S", 0.5)
    cache = tmp_path / "embed-onnx"
    thread, failure = _start_export(cache)
    child, workdir = _the_export_child()
    for _ in range(6000):
        if (workdir / "traced.onnx").is_file():
            break
        time.sleep(0.01)
    stop_exports()
    thread.join(60)
    assert not thread.is_alive()
    assert child.returncode == -signal.SIGKILL
    assert failure and "exit -9" in str(failure[0]), failure
    assert list(cache.iterdir()) == []


def test_a_stop_while_another_thread_imports_the_onnx_module_is_quiet(monkeypatch):
    """``rag serve`` stopping at once (its port taken) while the warm-up thread still imports ``embed_onnx``: the
    module in ``sys.modules`` has no ``stop_exports`` yet, and no export can have started."""
    import types

    monkeypatch.setitem(sys.modules, "rag_service.embed_onnx", types.ModuleType("rag_service.embed_onnx"))
    stop_model_exports()


def test_a_query_that_fails_during_the_first_export_ends_it_instead_of_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong RAG_DATABASE_URL on a first run: ``rag query`` says so without waiting for the export its model
    thread started (it waited up to 10 s, then the export was thrown away anyway). The export child stops itself
    before it exports, so only the command's own stop can end it."""
    import argparse

    from rag_service.cli_commands import _query
    from rag_service.config import load_settings
    from rag_service.errors import DatabaseUnavailableError

    stop_first = "import os, signal; os.kill(os.getpid(), signal.SIGSTOP); "
    monkeypatch.setattr(embed_onnx, "_EXPORT_CHILD", stop_first + embed_onnx._EXPORT_CHILD)
    settings = replace(
        load_settings(), database_url="postgresql://nobody@127.0.0.1:1/none", data_dir=tmp_path,
        embedding_backend="onnx-int8",
    )
    args = argparse.Namespace(text="x", context="search", collection=None, set=[], max_chunks=None,
                              graph_weight=None, json=False)
    monkeypatch.setattr(embed_onnx, "_exports_refused", False)  # the command's refusal is its process's
    with pytest.raises(DatabaseUnavailableError, match=r"127\.0\.0\.1:1"):
        _query(args, settings)
    assert not embed_onnx._EXPORTS, "the export child outlived the command"
    assert not [p for p in (tmp_path / "models").rglob("*") if p.is_file()], "the stopped export left files"
