"""Importing rag_service changes nothing in the host process: no environment variable, no logging factory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rag_service.config import Settings
from rag_service.retrieve.rerank import default_cache_dir

_IMPORT_EVERYTHING = """
import importlib, json, logging, os, pkgutil
before_env, before_factory = dict(os.environ), logging.getLogRecordFactory()
import rag_service
names = [m.name for m in pkgutil.walk_packages(rag_service.__path__, "rag_service.")
         if not m.name.startswith("rag_service.migrations")]  # alembic runs env.py and the versions itself
for name in names:
    importlib.import_module(name)
assert rag_service.tokens.count_tokens("counting tokens offline") > 0  # nor does counting tokens
changed = sorted(k for k in set(before_env) | set(os.environ) if before_env.get(k) != os.environ.get(k))
swapped = logging.getLogRecordFactory() is not before_factory
print(json.dumps({"modules": len(names), "env": changed, "factory": swapped}))
"""


def test_importing_every_module_and_counting_tokens_write_no_environment_variable(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "TIKTOKEN_CACHE_DIR", "HF_HUB_OFFLINE")}
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERYTHING], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["modules"] > 30
    assert outcome["env"] == [], "importing rag_service wrote these environment variables"
    assert outcome["factory"] is False, "importing rag_service swapped the logging record factory"


def test_the_reranker_cache_folder_comes_from_settings(tmp_path: Path):
    assert default_cache_dir(Settings(data_dir=tmp_path / "data")) == tmp_path / "data" / "models"
