"""The bundled all-MiniLM-L6-v2 on ONNX Runtime with its own ``tokenizers`` tokenizer: no torch to embed.

The ONNX file is exported once from the bundled weights (torch is needed for that one export) and
cached under ``RAG_DATA_DIR/models/embed-onnx``; the graph includes the model's mean pooling and L2
normalisation, so one ``session.run`` gives what sentence-transformers' ``encode`` gives.

Why not sentence-transformers' own ``backend="onnx"``: it runs through optimum's ``ORTModel``, which
imports torch and transformers at load time, the very cost this module removes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rag_service.errors import ModelLoadError
from rag_service.forks import ChildLock
from rag_service.knobs import EMBEDDING_BATCH_SIZE
from rag_service.log import quiet_progress_bars, quiet_root_logger
from rag_service.onnx_runtime import cpu_session, files_key, intra_op_threads

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from rag_service.model_window import ModelWindow

    Vectors = npt.NDArray[np.float32]

Precision = Literal["fp32", "int8"]

log = logging.getLogger(__name__)

#: a query of at most this many tokens runs on one thread: after the idle gap a query follows (its SQL), the
#: operators' threads wake slowly, so short ones took longer on two (int8, 16 tokens p50 2.9 ms on one against
#: 3.9 on two, p95 3.5 against 7.7; docs/benchmarks.md, session 15); longer ones gain from the threads
QUERY_ONE_THREAD_TOKENS = 64

#: bump when the exported graph changes, so older exports are not reused
EXPORT_VERSION = 2
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_key(source: Path) -> str:
    """Which export belongs to the weights in ``source``."""
    names = ("config.json", "sentence_bert_config.json", "tokenizer.json", "model.safetensors")
    return files_key(source, names, salt=f"v{EXPORT_VERSION}")


def model_file(directory: Path, precision: Precision) -> Path:
    """The ``.onnx`` file of ``precision`` inside an export directory."""
    return directory / ("model.onnx" if precision == "fp32" else "model_int8.onnx")


def ensure_export(source: Path, cache_dir: Path) -> Path:
    """The export directory of ``source`` under ``cache_dir``, exported now if it is missing or incomplete."""
    target = cache_dir / f"sentence-model-{export_key(source)}"
    needed = (model_file(target, "fp32"), model_file(target, "int8"), target / "tokenizer.json")
    if not all(f.is_file() for f in needed):
        shutil.rmtree(target, ignore_errors=True)  # half a directory (a file deleted by hand): export again
        # a first query or ingest otherwise waits ~12 s in silence (a warning, so that it shows by default)
        log.warning("preparing the embedding model once for %s (an ONNX export, ~15 s)", cache_dir)
        _export_in_child(source, target)
    return target


#: the export children running now, each with the temporary folder it writes in (``stop_exports`` ends them)
_EXPORTS: dict[subprocess.Popen[bytes], Path] = {}
_EXPORTS_LOCK = ChildLock()
_exports_refused = False  # a command leaving early: an export its model thread starts after the stop ends at once
#: how long ``stop_exports`` waits for a child to end after SIGTERM before it kills it
_EXPORT_STOP_WAIT_S = 10.0
_EXPORT_CHILD = (
    "import sys; from pathlib import Path; from rag_service.embed_onnx import _export_quietly; "
    "_export_quietly(*map(Path, sys.argv[1:4]))"
)


def _export_in_child(source: Path, target: Path) -> None:
    """``export_sentence_model`` in a child process, into a temporary folder this process makes and removes.

    torch and the exporter's native threads never enter this process: a stop signal that ends a
    process while its warm-up thread was still exporting in-process aborted it ("terminate called
    without an active exception", exit -6, from native threads torn down under it), and torch's
    memory stayed with the server. A stopping process ends the child with ``stop_exports`` (an exit
    handler). The folder is this process's to remove, not the child's: a SIGINT the child was to
    clean up after came while the export's last steps ran, and the child finished (exit 0, CI of
    session 48), and a child killed after the wait could not clean up at all.
    """
    _private_folder(target.parent)
    workdir = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))  # 0700
    try:
        with _EXPORTS_LOCK:  # one step with the refusal: a stop never misses a child that starts meanwhile
            if _exports_refused:
                raise RuntimeError(f"exporting {source} to ONNX was not started: the command is leaving")
            child = subprocess.Popen(
                [sys.executable, "-c", _EXPORT_CHILD, str(source), str(target), str(workdir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            if not _EXPORTS:
                atexit.register(stop_exports)
            _EXPORTS[child] = workdir
        try:
            _, err = child.communicate()
        except BaseException:  # a KeyboardInterrupt in the thread that waits (a CLI's main thread)
            _end_children([child])
            raise
        finally:
            with _EXPORTS_LOCK:
                _EXPORTS.pop(child, None)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # renamed into place when the export succeeded
    if child.returncode != 0:
        lines = err.decode("utf-8", errors="replace").strip().splitlines()
        last = lines[-1] if lines else "no output"  # the child's exception, after any warnings
        raise RuntimeError(f"exporting {source} to ONNX failed (exit {child.returncode}): {last}")


def stop_exports(*, for_good: bool = False) -> None:
    """End the export children still running and remove what they wrote, waiting briefly for each.

    SIGTERM, whose default action no Python code in the child can catch or swallow, then SIGCONT so
    that a stopped child (a job suspended with Ctrl-Z) ends too; SIGKILL after ``_EXPORT_STOP_WAIT_S``.
    ``for_good`` (a command leaving early): no export starts in this process after it either.
    """
    global _exports_refused
    with _EXPORTS_LOCK:
        _exports_refused = _exports_refused or for_good
        children = dict(_EXPORTS)
    _end_children(list(children))
    for workdir in children.values():
        shutil.rmtree(workdir, ignore_errors=True)  # before the process exits, whatever its export thread does


def _end_children(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM and SIGCONT to each of ``children``, then SIGKILL to those still running after the wait."""
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
            child.send_signal(signal.SIGCONT)
    for child in children:
        try:
            child.wait(timeout=_EXPORT_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _export_quietly(source: Path, target: Path, workdir: Path) -> None:
    """The export child's body: ``export_sentence_model`` into ``workdir``, without progress bars."""
    with quiet_progress_bars():
        export_sentence_model(source, target, workdir=workdir)


def export_sentence_model(source: Path, target: Path, *, workdir: Path) -> Path:
    """Export the mean-pooled, normalised sentence model in ``source`` to ``target`` (fp32 and int8).

    Written in ``workdir`` (an empty folder beside ``target``, which its maker removes) and renamed into
    place, so a reader never sees half an export. Needs torch, transformers and onnx, once.
    """
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(source), attn_implementation="eager", local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    texts = ["a short text", "a somewhat longer text with a few more words"]  # padded: the general mask path
    sample = tokenizer(texts, padding=True, return_tensors="pt")
    axes = {k: {0: "batch", 1: "sequence"} for k in _INPUTS} | {"sentence_embedding": {0: "batch"}}
    traced = workdir / "traced.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notes
        torch.onnx.export(
            _with_pooling(model),
            tuple(sample[k] for k in _INPUTS),
            str(traced),
            input_names=list(_INPUTS),
            output_names=["sentence_embedding"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    # onnxruntime's BERT fusions (attention, skip-layer-norm, bias-GELU): 1.5x the traced graph's
    # throughput at a cosine of 1.0000 to it (docs/benchmarks.md)
    heads, hidden = int(model.config.num_attention_heads), int(model.config.hidden_size)
    fused = optimizer.optimize_model(
        str(traced), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1
    )
    fused.save_model_to_file(str(model_file(workdir, "fp32")))
    traced.unlink()
    with quiet_root_logger():
        quantize_dynamic(
            str(model_file(workdir, "fp32")),
            str(model_file(workdir, "int8")),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # the fused ops' outputs
        )
    for name in ("tokenizer.json", "sentence_bert_config.json"):
        shutil.copy2(source / name, workdir / name)
    (workdir / "rag_export.json").write_text(json.dumps({"source": str(source), "version": EXPORT_VERSION}) + "\n")
    for written in workdir.iterdir():  # like the rest of the data folder: the owner's alone
        written.chmod(0o600)
    try:
        workdir.rename(target)
    except OSError:
        if not model_file(target, "int8").is_file():  # not merely another process that won the race
            raise
    return target


def _private_folder(folder: Path) -> None:
    """``folder`` and the parents it needs, each made readable by its owner only."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    for made in missing:
        made.chmod(0o700)


def _with_pooling(model: Any) -> Any:
    """``model`` followed by sentence-transformers' Pooling (mean) and Normalize modules, as one torch module."""
    import torch

    class MeanPooled(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return MeanPooled(model)


class OnnxEmbedder:
    """An exported sentence model (``export_sentence_model``) run by onnxruntime with a ``tokenizers`` tokenizer."""

    def __init__(
        self,
        directory: Path,
        *,
        model_id: str,
        precision: Precision = "fp32",
        batch_size: int = EMBEDDING_BATCH_SIZE.default,
        dim: int = 384,
    ) -> None:
        from tokenizers import Tokenizer

        file = model_file(directory, precision)
        if not file.is_file():
            raise ModelLoadError(f"ONNX embedding model {file} does not exist; delete {directory} to export it again")
        max_length = int(json.loads((directory / "sentence_bert_config.json").read_text())["max_seq_length"])
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
        self._file = file
        self._directory = directory
        self._query_session = cpu_session(file, threads=1)  # short queries (QUERY_ONE_THREAD_TOKENS)
        self._feeds = [i.name for i in self._query_session.get_inputs()]
        self._threaded: Any = None  # the session on intra_op_threads(), made on first use
        self._lock = ChildLock()
        self._workers: queue.SimpleQueue[Any] | None = None  # one-thread sessions for batches, made on first use
        self._workers_lock = ChildLock()
        self.model_id = model_id
        self.dim = dim
        self.batch_size = batch_size
        self.precision = precision

    def window(self) -> ModelWindow:
        """What the model reads: its tokenizer without truncation, and its window (``model_window``)."""
        from rag_service.model_window import tokenizer_window

        return tokenizer_window(self._directory)

    def _feed(self, texts: Sequence[str]) -> dict[str, Any]:
        """The model's inputs for ``texts``, padded to the longest."""
        import numpy as np

        with self._lock:  # a tokenizer's padding state is shared: one batch at a time
            encodings = self._tokenizer.encode_batch(list(texts))
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        return {name: np.asarray(columns[name], dtype=np.int64) for name in self._feeds}

    def _threaded_session(self) -> Any:
        with self._workers_lock:
            if self._threaded is None:
                self._threaded = cpu_session(self._file)
            return self._threaded

    def _run(self, texts: Sequence[str], session: Any = None) -> Vectors:
        import numpy as np

        feed = self._feed(texts)
        vectors: Vectors = np.asarray((session or self._threaded_session()).run(None, feed)[0], dtype=np.float32)
        return vectors

    def _batch_sessions(self) -> queue.SimpleQueue[Any]:
        """One single-threaded session per core, taken and given back by the batches that run on them.

        Whole batches side by side beat one batch split across the cores by the operators' threads
        (their hand-offs between every operator): fp32 1.2x, int8 1.5x the chunks/s on 2 cores
        (docs/benchmarks.md, session 8). Each session holds its own copy of the weights.
        """
        with self._workers_lock:
            if self._workers is None:
                workers: queue.SimpleQueue[Any] = queue.SimpleQueue()
                for _ in range(intra_op_threads()):
                    workers.put(cpu_session(self._file, threads=1))
                self._workers = workers
            return self._workers

    def _run_on_worker(self, texts: Sequence[str]) -> Vectors:
        workers = self._batch_sessions()
        session = workers.get()
        try:
            return self._run(texts, session)
        finally:
            workers.put(session)

    @property
    def rows_per_call(self) -> int:
        """Texts per model call: ``batch_size``, but one for int8, whose vectors would depend on their batch.

        Dynamic quantization scales each activation tensor by its own range, the whole batch's (padding included):
        a chunk embedded beside others came out at a cosine of ~0.994 to itself embedded alone, as a query is.
        One text a call costs int8 nothing here (29-33 chunks/s either way, docs/benchmarks.md, session 21).
        """
        return 1 if self.precision == "int8" else self.batch_size

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Encode texts in calls of ``rows_per_call``, similar lengths together (less padding), in input order."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        size = self.rows_per_call
        batches = [order[start : start + size] for start in range(0, len(order), size)]
        cores = intra_op_threads()
        if len(batches) == 1 or cores == 1:  # nothing to run side by side: the operators' threads share the batch
            for rows in batches:
                out[rows] = self._run([texts[i] for i in rows])
            return out
        with ThreadPoolExecutor(max_workers=cores, thread_name_prefix="rag-onnx-batch") as pool:
            for rows, vectors in zip(
                batches, pool.map(lambda rows: self._run_on_worker([texts[i] for i in rows]), batches), strict=True
            ):
                out[rows] = vectors
        return out

    def embed_query(self, text: str) -> Vectors:
        """Encode one query: on one thread when it is short (``QUERY_ONE_THREAD_TOKENS``), else on all."""
        import numpy as np

        feed = self._feed([text])
        short = feed["input_ids"].shape[1] <= QUERY_ONE_THREAD_TOKENS
        session = self._query_session if short else self._threaded_session()
        vector: Vectors = np.asarray(session.run(None, feed)[0], dtype=np.float32)[0]
        return vector
