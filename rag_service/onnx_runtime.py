"""The one place ONNX Runtime sessions are made: the embedder and the ONNX cross-encoder share its options.

Threads are decided once per process (``intra_op_threads``), so the two models never oversubscribe
the cores between them by each picking its own count.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    import onnxruntime as ort

#: ONNX Runtime (1.32) starts a telemetry thread when it loads unless this is set; a process forked after that
#: (gunicorn --preload, Celery prefork) hangs when it exits through sys.exit (README, "Pre-forking servers")
NO_TELEMETRY = "ORT_DISABLE_TELEMETRY"
_loaded_quiet = False  # this module loaded ONNX Runtime with its telemetry off


def load_onnxruntime() -> ModuleType:
    """``onnxruntime``, loaded with its telemetry off unless the environment says otherwise (``NO_TELEMETRY``).

    Every path of the product that loads ONNX Runtime (the embedder, both cross-encoders) comes through here. The
    setting is read once, as the library loads: it is in the environment for the import alone, so the caller's
    process keeps its environment. An application that loaded ONNX Runtime first keeps what it loaded.
    """
    global _loaded_quiet
    if "onnxruntime" not in sys.modules:
        given = os.environ.get(NO_TELEMETRY)
        os.environ[NO_TELEMETRY] = "1" if given is None else given
        try:
            import onnxruntime  # noqa: F401
        finally:
            if given is None:
                os.environ.pop(NO_TELEMETRY, None)
        _loaded_quiet = os.environ.get(NO_TELEMETRY, "1") == "1"
    return sys.modules["onnxruntime"]


def telemetry_thread_may_run() -> bool:
    """ONNX Runtime is loaded and may have started its telemetry thread (a forked child may hang at its exit)."""
    return "onnxruntime" in sys.modules and not _loaded_quiet and os.environ.get(NO_TELEMETRY) != "1"


@functools.cache
def intra_op_threads() -> int:
    """Threads per inference: the cores this process may use, at most 4 (MiniLM gains nothing beyond).

    ``OMP_NUM_THREADS``, when the user set it, wins, as it would for torch.
    """
    explicit = os.environ.get("OMP_NUM_THREADS", "").strip()
    if explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def session_options(threads: int | None = None) -> ort.SessionOptions:
    """Options of every session: ``intra_op_threads()`` threads that spin within a run and stop at its end."""
    ort = load_onnxruntime()

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or intra_op_threads()
    options.inter_op_num_threads = 1
    # Workers spin between the operators of a run (waking a sleeping thread per operator made a
    # query embedding ~1.3x slower and cost more CPU) but stop when the run ends: spinning after it
    # starved PostgreSQL and other requests (reranker p95 550 ms instead of ~190).
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: no start-up warnings on stderr
    return options


def cpu_session(model_file: Path, threads: int | None = None) -> ort.InferenceSession:
    """An inference session of ``model_file`` on the CPU with ``session_options``."""
    ort = load_onnxruntime()

    return ort.InferenceSession(str(model_file), session_options(threads), providers=["CPUExecutionProvider"])


def files_key(folder: Path, names: tuple[str, ...], *, salt: str = "") -> str:
    """A short key of the named files in ``folder`` (sizes, and the bytes of small ones): which export
    belongs to which weights, found without loading them (a 90 MB hash, or torch, at every start)."""
    digest = hashlib.sha256(salt.encode())
    for name in names:
        file = folder / name
        if not file.is_file():
            continue
        size = file.stat().st_size
        digest.update(f"{name}:{size}:".encode())
        if size < 1_000_000:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]
