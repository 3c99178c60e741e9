"""Building the service in a library caller's process changes nothing process-wide: no environment
variable, no logging record factory, no root handler. Only the ``rag`` command, which owns its process, may."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_service.db import migrate
from rag_service.db.engine import make_engine
from tests.conftest import seed_onnx_export

_BUILD_AND_RETRIEVE = """
import importlib, json, logging, os, sys
for name in sys.argv[1:]:  # the caller's own imports, before the window
    importlib.import_module(name)
before_env, before_factory = dict(os.environ), logging.getLogRecordFactory()
def handlers():  # the root's, and our own logger's (where the rag command adds its stderr handler)
    return [list(logging.getLogger(name).handlers) for name in (None, "rag_service")]
before_handlers = handlers()
def progress_bars():  # transformers' process-wide switch, when the caller has it loaded
    module = sys.modules.get("transformers.utils.logging")
    return None if module is None else module.is_progress_bar_enabled()
before_bars = progress_bars()
from rag_service import get_universal_rag
service = get_universal_rag()
service.index_texts([("notes.md", "Notes", "Tomatoes ripen faster beside bananas.")], collection="default")
result = service.retrieve("why do tomatoes ripen", "chatbot")
changed = sorted(k for k in set(before_env) | set(os.environ) if before_env.get(k) != os.environ.get(k))
print(json.dumps({
    "env": changed,
    "factory": logging.getLogRecordFactory() is not before_factory,
    "handlers": handlers() != before_handlers,
    "bars": progress_bars() != before_bars,
    "found": [chunk.source for chunk in result.chunks],
}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "imported_before"),
    [
        ("onnx", []),
        # the embedder that used to set HF_HUB_OFFLINE; importing sentence-transformers itself sets torch's
        # KMP_* and TORCHINDUCTOR_CACHE_DIR, so this caller has imported it before the window
        ("torch", ["sentence_transformers"]),
    ],
)
def test_building_the_service_and_retrieving_leave_the_process_as_it_was(
    backend, imported_before, database_factory, settings, onnx_export, tmp_path: Path
):
    url = database_factory.create("rag_effects")
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    engine.dispose()
    seed_onnx_export(tmp_path / "data", onnx_export)
    quiet = ("OMP_WAIT_POLICY", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # conftest sets the offline pair
    env = {k: v for k, v in os.environ.items() if k not in quiet and not k.startswith("RAG_")}
    env |= {
        "RAG_DATABASE_URL": url,
        "RAG_DATA_DIR": str(tmp_path / "data"),
        "RAG_EMBEDDING_BACKEND": backend,
        "RAG_RERANK_MODEL": "none",
    }
    done = subprocess.run(
        [sys.executable, "-c", _BUILD_AND_RETRIEVE, *imported_before],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["found"] == ["notes.md"], "retrieve() found nothing in the built service"
    assert outcome["env"] == [], "building the service wrote these environment variables"
    assert outcome["factory"] is False, "building the service swapped the logging record factory"
    assert outcome["handlers"] is False, "building the service added a logging handler"
    assert outcome["bars"] is False, "loading the model switched transformers' progress bars off for good"
