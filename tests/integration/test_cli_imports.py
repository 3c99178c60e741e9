"""The CLI imports no model it does not use: checked in a new process, through its sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_service.db import migrate
from rag_service.db.database import Database
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder, bundled_model_id
from rag_service.ingest.indexer import Indexer
from tests.conftest import seed_onnx_export

HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "onnxruntime",
    "flashrank",
    "fastapi",  # the server extra: only `rag serve` needs it
    "uvicorn",
    "langchain_core",
    "llama_index",
    "mcp",
    "alembic",  # only migrating needs it (its import is most of a no-op reindex)
    "numpy",  # only vectors need it: an unchanged reindex makes and reads none
    "sumy",  # summaries of changed documents
    "httpx",  # the optional LLM endpoint
)

#: our own modules a command loads only when it does that work
HEAVY_PARTS = (
    "rag_service.ingest.indexer",  # the ingest stack (chunkers, loaders, graph): not for a query
    "rag_service.ingest.batch",
)

_RUN = f"""
import json, sys
from rag_service.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:
    rc = exc.code
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
parts = sorted(set(sys.modules) & set({HEAVY_PARTS!r}))
print("\\n" + json.dumps({{"rc": rc, "heavy": heavy, "parts": parts}}))
"""


def _rag(cwd: Path, url: str, *argv: str) -> tuple[int, list[str]]:
    outcome = _outcome(cwd, url, *argv)
    return outcome["rc"], outcome["heavy"]


def _outcome(cwd: Path, url: str, *argv: str) -> dict[str, Any]:
    env = dict(os.environ, RAG_DATABASE_URL=url, RAG_RERANK_MODEL="none", RAG_DATA_DIR=str(cwd / "data"))
    env.pop("RAG_EMBEDDING_MODEL", None)  # the bundled model, as a new user has it
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip(), done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


@pytest.fixture
def corpus_url(database_factory, settings, tmp_path, monkeypatch) -> str:
    """A database holding tmp_path/docs, indexed as if by the bundled model (no model needed here)."""
    url = database_factory.create("rag_cli_imports")
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nVacuum, checkpoints and replication slots, note number {i}.\n")
    monkeypatch.chdir(tmp_path)
    embedder = HashingEmbedder(model_id=bundled_model_id())
    report = Indexer(Database(engine), embedder, settings).index_paths(["docs"])
    engine.dispose()
    assert report.added == 3
    return url


def test_help_status_and_an_unchanged_reindex_load_no_model(corpus_url, tmp_path):
    assert _rag(tmp_path, corpus_url, "--help") == (0, [])
    assert _rag(tmp_path, corpus_url, "db", "status") == (0, [])
    assert _rag(tmp_path, corpus_url, "reindex", "docs", "--quiet") == (0, []), "nothing changed: no model"


@pytest.mark.slow
def test_query_embeds_on_onnx_without_torch_and_loads_no_reranker_when_reranking_is_off(
    corpus_url, onnx_export, tmp_path
):
    seed_onnx_export(tmp_path / "data", onnx_export)  # exported once for the run, as `rag` does on first use
    outcome = _outcome(tmp_path, corpus_url, "query", "replication slots")
    rc, heavy = outcome["rc"], outcome["heavy"]
    assert rc == 0
    assert outcome["parts"] == [], "a query imports no ingest stack"
    assert "onnxruntime" in heavy
    assert not {"torch", "transformers", "sentence_transformers", "flashrank"} & set(heavy), heavy
