"""The built wheel works on its own: installed (not editable) into a fresh venv, run outside the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _build_wheel(tmp_path: Path) -> Path:
    """Build from a copy of the sources, so the checkout gets no build/ or egg-info litter."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "rag_service", src / "rag_service", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)], cwd=tmp_path)
    (wheel,) = dist.glob("rag_service-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A venv holding only the wheel; its dependencies come from this venv's site-packages (no network)."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    _run([*pip, "install", "--no-deps", "--no-index", str(wheel)], cwd=tmp_path)
    fresh_site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=tmp_path).strip()
    )
    # appended after the venv's own site-packages: the wheel's rag_service wins over the editable one
    (fresh_site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def test_an_installed_wheel_migrates_and_runs_the_demo_outside_the_checkout(database_factory, tmp_path):
    wheel = _build_wheel(tmp_path)
    venv = _fresh_venv(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_") and k != "PYTHONPATH"}
    env.update(RAG_DATABASE_URL=database_factory.create("rag_wheel"), RAG_RERANK_MODEL="none", HF_HUB_OFFLINE="1")

    where = _run(
        [str(venv / "bin" / "python"), "-c", "import rag_service; print(rag_service.__file__)"], cwd=elsewhere, env=env
    )
    assert where.strip().startswith(str(venv)), f"not the installed wheel: {where}"
    assert (Path(where.strip()).parent / "migrations" / "script.py.mako").exists()

    upgraded = _run([str(venv / "bin" / "rag"), "db", "upgrade"], cwd=elsewhere, env=env)
    assert "run `rag db upgrade`" not in upgraded, upgraded
    demo = _run([str(venv / "bin" / "rag"), "demo"], cwd=elsewhere, env=env, timeout=900)
    assert "packaged README" in demo and "0 failed" in demo, demo
    assert "top: rag_service/README.md" in demo, demo
    # the agent preset answers its question from the README and turns the off-topic one away
    answered = "=== agent: What does RAG_EXACT_SEARCH_BELOW control?\ntop: rag_service/README.md § rag_service > Config"
    assert answered in demo, demo
    assert "=== agent: What is the boiling point of ethanol?\nno relevant passages" in demo, demo
