"""Reranking: rescore the fused candidates with a cross-encoder and keep the best.

A ``Reranker`` scores ``(query, document)`` pairs in one batched call; ``rerank`` sorts by that score.
A score is the model's raw relevance logit (higher is more relevant, unbounded; for a two-label
model ``logit[1] - logit[0]``), the same scale for every backend. Map it to 0..1 with a sigmoid.

``load_reranker(spec)`` reads ``RAG_RERANK_MODEL``:

====================================  ==========================================================
``none``                              reranking off: ``None``
``ms-marco-MiniLM-L-6-v2`` (default)  ``onnx:cross-encoder/ms-marco-MiniLM-L-6-v2`` - the very
                                      model, exported once to int8 ONNX (design budget: 20
                                      candidates in 300 ms p95 on 2 cores; torch fp32 misses it)
``onnx:<name or path>``               a Hugging Face cross-encoder (hub name or local directory)
                                      exported once to int8 ONNX under ``cache_dir/onnx`` and run
                                      by onnxruntime; a directory holding ``model.onnx`` (or an
                                      ``.onnx`` file) with its tokenizer is run as it is
``cross-encoder:<name or path>``      sentence-transformers ``CrossEncoder``, torch, fp32
``flashrank:<name>``                  a FlashRank ONNX model kept in ``cache_dir/flashrank``
any other name or path                as ``cross-encoder:``
====================================  ==========================================================

Models come from a local path, the local cache (Hugging Face's for hub names, ``cache_dir`` for
FlashRank and the ONNX exports), or are downloaded on first use. Loading never hangs offline: with
``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` set nothing is fetched, and otherwise one short probe
(``PROBE_TIMEOUT_S``) must reach the hub before a download starts, so an offline machine gets a
``ModelLoadError`` in seconds rather than after the hub client's retries (about 47 s per model here).

Torch's global thread count is never changed; onnxruntime sessions use their own pools.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import urllib.error
import urllib.request
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rag_service.config import Settings, load_settings
from rag_service.errors import ConfigurationError, ModelLoadError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DEFAULT_RERANK_MODEL",
    "CrossEncoderReranker",
    "FlashRankReranker",
    "FunctionReranker",
    "OnnxReranker",
    "RerankScore",
    "Reranker",
    "RerankerCache",
    "default_cache_dir",
    "export_onnx",
    "load_reranker",
    "rerank",
]

DEFAULT_RERANK_MODEL = "ms-marco-MiniLM-L-6-v2"
_ALIASES = {DEFAULT_RERANK_MODEL.lower(): "onnx:cross-encoder/ms-marco-MiniLM-L-6-v2"}
PROBE_TIMEOUT_S = 3.0
_DOWNLOAD_TIMEOUT_S = (3.0, 30.0)  # connect, between reads
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_FIX = "set RAG_RERANK_MODEL to a local model directory, or to 'none' to turn reranking off"
_T = TypeVar("_T")
_Key = tuple[str, Path | None, int]


@dataclass(frozen=True, slots=True)
class RerankScore:
    """One candidate after reranking: its position in the input and the model's score."""

    index: int
    score: float


class Reranker(Protocol):
    """Scores documents against a query with a relevance model."""

    name: str
    """What runs, e.g. ``"onnx-int8:cross-encoder/ms-marco-MiniLM-L-6-v2"``; goes to ``metrics.reranker``."""
    returns_logits: bool
    """True when scores are raw logits (map with a sigmoid); False when they are already in 0..1."""

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Return one raw relevance score per document, in the documents' order (one batched call)."""
        ...


def rerank(reranker: Reranker, query: str, documents: Sequence[str], *, top_k: int) -> list[RerankScore]:
    """Score ``documents`` and return the best ``top_k``, highest score first, ties in input order."""
    if top_k < 1:
        raise ConfigurationError(f"top_k ({top_k}) must be at least 1")
    if not documents:
        return []
    scores = reranker.score(query, documents)
    if len(scores) != len(documents):
        raise ValueError(f"{reranker.name} returned {len(scores)} scores for {len(documents)} documents")
    order = sorted(range(len(scores)), key=lambda i: (math.isnan(scores[i]), -scores[i]))
    return [RerankScore(index=i, score=float(scores[i])) for i in order[:top_k]]


class FunctionReranker:
    """A reranker computed by a plain function of ``(query, document)``; for tests and experiments."""

    def __init__(
        self, function: Callable[[str, str], float], *, name: str = "function", returns_logits: bool = True
    ) -> None:
        self.name = name
        self.returns_logits = returns_logits
        self._function = function

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Apply the function to each pair."""
        return [float(self._function(query, doc)) for doc in documents]


# --------------------------------------------------------------------------- backends


class CrossEncoderReranker:
    """sentence-transformers ``CrossEncoder`` on the CPU (torch, fp32); raw logits as scores."""

    def __init__(
        self, name_or_path: str | Path, *, max_length: int = 256, batch_size: int = 32, device: str = "cpu"
    ) -> None:
        from sentence_transformers import CrossEncoder

        source = _resolve_source(str(name_or_path))

        def load(local_files_only: bool) -> Any:
            return CrossEncoder(source, device=device, max_length=max_length, local_files_only=local_files_only)

        with _load_errors(str(name_or_path)):
            self._model = _load_local_or_hub(str(name_or_path), source, load)
            num_labels = int(self._model.num_labels)
        _check_labels(str(name_or_path), num_labels)
        self.name = f"cross-encoder:{name_or_path}"
        self.returns_logits = True
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Score all pairs in batches of ``batch_size``."""
        import torch

        if not documents:
            return []
        with self._lock:
            logits = self._model.predict(
                [(query, doc) for doc in documents],
                batch_size=self._batch_size,
                show_progress_bar=False,
                activation_fn=torch.nn.Identity(),
                convert_to_numpy=True,
            )
        return _relevance(logits)


class OnnxReranker:
    """An ONNX cross-encoder run by onnxruntime, with its Hugging Face tokenizer.

    ``path`` is a directory holding ``model.onnx`` and the tokenizer files (as ``export_onnx`` writes
    them), or an ``.onnx`` file whose directory holds the tokenizer.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_length: int = 256,
        batch_size: int = 32,
        name: str | None = None,
        intra_op_threads: int = 0,
    ) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        model_file = Path(path).expanduser()
        if model_file.is_dir():
            model_file = model_file / "model.onnx"
        if not model_file.is_file():
            raise ModelLoadError(f"reranker ONNX model {model_file} does not exist; {_FIX}")
        with _load_errors(str(path)):
            self._tokenizer = AutoTokenizer.from_pretrained(str(model_file.parent), local_files_only=True)
            options = ort.SessionOptions()
            options.intra_op_num_threads = intra_op_threads  # 0: one per physical core, for this session
            # Idle worker threads sleep instead of spinning: when PostgreSQL or another request holds
            # a core, spinning threads starve the one doing the work (p95 550 ms instead of ~190).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session = ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._max_length = min(max_length, int(getattr(self._tokenizer, "model_max_length", max_length)))
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self.name = name or f"onnx:{path}"
        self.returns_logits = True

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Score all pairs in batches of ``batch_size``, padded to the longest pair of each batch."""
        import numpy as np

        out: list[float] = []
        with self._lock:  # fast tokenizers are not safe to call from several threads at once
            for start in range(0, len(documents), self._batch_size):
                batch = list(documents[start : start + self._batch_size])
                enc = self._tokenizer(
                    [query] * len(batch),
                    batch,
                    padding=True,
                    truncation=True,
                    max_length=self._max_length,
                    return_tensors="np",
                )
                feed = {
                    key: np.asarray(enc[key] if key in enc else np.zeros_like(enc["input_ids"]), dtype=np.int64)
                    for key in self._inputs
                }
                out.extend(_relevance(self._session.run(None, feed)[0]))
        return out


class FlashRankReranker:
    """A FlashRank pairwise ONNX model (e.g. ``ms-marco-MiniLM-L-12-v2``) kept in ``cache_dir``.

    A model missing from ``cache_dir`` is downloaded once from FlashRank's repository, with short
    timeouts, unless offline mode is on; a failed download raises ``ModelLoadError`` at once.
    """

    def __init__(self, model_name: str, *, cache_dir: str | Path, max_length: int = 256, batch_size: int = 32) -> None:
        from flashrank import Ranker
        from flashrank.Config import listwise_rankers, model_file_map

        if model_name not in model_file_map or model_name in listwise_rankers:
            known = ", ".join(sorted(set(model_file_map) - set(listwise_rankers)))
            raise ModelLoadError(f"unknown FlashRank model {model_name!r}; use one of: {known}")
        cache = Path(cache_dir).expanduser()
        if not (cache / model_name / model_file_map[model_name]).is_file():
            _download_flashrank(model_name, cache)
        # Ranker() calls logging.basicConfig(): keep it from configuring the application's logging
        hint = f"delete {cache / model_name} to download it again, or {_FIX}"
        with _load_errors(f"flashrank:{model_name}", hint=hint), _quiet_root_logger():
            ranker = Ranker(model_name=model_name, cache_dir=str(cache), max_length=max_length)
        self._session = ranker.session
        self._tokenizer = ranker.tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self.name = f"flashrank:{model_name}"
        self.returns_logits = True

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Score all pairs with FlashRank's session; raw logits, not FlashRank's sigmoid."""
        import numpy as np

        out: list[float] = []
        with self._lock:
            for start in range(0, len(documents), self._batch_size):
                encoded = self._tokenizer.encode_batch(
                    [(query, doc) for doc in documents[start : start + self._batch_size]]
                )
                columns = {
                    "input_ids": [e.ids for e in encoded],
                    "attention_mask": [e.attention_mask for e in encoded],
                    "token_type_ids": [e.type_ids for e in encoded],
                }
                feed = {k: np.asarray(v, dtype=np.int64) for k, v in columns.items() if k in self._inputs}
                out.extend(_relevance(self._session.run(None, feed)[0]))
        return out


# --------------------------------------------------------------------------- loading


def default_cache_dir(settings: Settings | None = None) -> Path:
    """``Settings.data_dir / "models"`` (``.rag_data/models`` by default): FlashRank models and ONNX exports."""
    return (settings or load_settings()).data_dir / "models"


def load_reranker(spec: str, *, cache_dir: Path | None = None, max_length: int = 256) -> Reranker | None:
    """Load the reranker named by ``spec`` (see the module doc); ``None`` when it is ``none``.

    Raises ``ModelLoadError`` with a one-line reason when the model cannot be loaded.
    """
    text = spec.strip()
    if not text:
        raise ModelLoadError(f"RAG_RERANK_MODEL is empty; use a model name or path, or 'none'; {_FIX}")
    if text.lower() == "none":
        return None
    if max_length < 8:
        raise ModelLoadError(f"reranker max_length ({max_length}) must be at least 8")
    text = _ALIASES.get(text.lower(), text)
    prefix, _, target = text.partition(":")
    backend, target = prefix.lower(), target.strip()
    if backend not in ("flashrank", "cross-encoder", "onnx"):
        return CrossEncoderReranker(text, max_length=max_length)  # a bare name or path
    if not target:
        raise ModelLoadError(f"reranker spec {spec!r} names no model after '{prefix}:'; {_FIX}")
    cache = (cache_dir or default_cache_dir()).expanduser()
    if backend == "flashrank":
        return FlashRankReranker(target, cache_dir=cache / "flashrank", max_length=max_length)
    if backend == "cross-encoder":
        return CrossEncoderReranker(target, max_length=max_length)
    return _load_onnx(target, cache_dir=cache / "onnx", max_length=max_length)


def _load_onnx(name_or_path: str, *, cache_dir: Path, max_length: int) -> OnnxReranker:
    local = Path(name_or_path).expanduser()
    if local.suffix == ".onnx" or (local / "model.onnx").is_file():
        return OnnxReranker(local, max_length=max_length, name=f"onnx:{name_or_path}")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    source = _resolve_source(name_or_path)

    def load(local_files_only: bool) -> tuple[Any, Any]:
        kwargs: dict[str, Any] = {"local_files_only": local_files_only}
        model = AutoModelForSequenceClassification.from_pretrained(source, attn_implementation="eager", **kwargs)
        return model, AutoTokenizer.from_pretrained(source, **kwargs)

    with _load_errors(name_or_path):
        model, tokenizer = _load_local_or_hub(name_or_path, source, load)
        _check_labels(name_or_path, int(model.config.num_labels))
        slug = re.sub(r"[^\w.-]+", "_", name_or_path.strip("/\\~.")).strip("_")[-80:] or "model"
        target = cache_dir / f"{slug}-int8-{_fingerprint(model)[:16]}"
        if not (target / "model.onnx").is_file():
            export_onnx(model, tokenizer, target, quantize=True)
        del model
    return OnnxReranker(target, max_length=max_length, name=f"onnx-int8:{name_or_path}")


def export_onnx(model: Any, tokenizer: Any, target: Path, *, quantize: bool = True) -> Path:
    """Export a transformers sequence-classification model to ``target/model.onnx`` with its tokenizer.

    ``quantize`` applies onnxruntime's dynamic int8 quantisation to the weights. The directory is
    written beside ``target`` and renamed into place, so readers never see half an export. Needs
    the ``onnx`` package. Returns ``target``.
    """
    import torch

    try:
        import onnx  # noqa: F401  (torch's exporter and onnxruntime's quantiser both need it)
    except ImportError as err:
        raise ModelLoadError(
            f"exporting a reranker to ONNX needs the 'onnx' package: pip install onnx ({err})"
        ) from err
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        if getattr(model.config, "_attn_implementation", "eager") != "eager":
            model.set_attn_implementation("eager")
        model.eval()
        # a padded two-pair batch, so the traced graph keeps the general attention-mask path
        sample = tokenizer(
            ["a short query", "a somewhat longer query text"],
            ["a document", "a longer document with a few more words in it"],
            padding=True,
            return_tensors="pt",
        )
        names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
        fp32 = tmp / ("model_fp32.onnx" if quantize else "model.onnx")
        axes = {k: {0: "batch", 1: "sequence"} for k in names} | {"logits": {0: "batch"}}
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # legacy-exporter deprecation and tracer notes, export only
            torch.onnx.export(
                model,
                (),
                str(fp32),
                kwargs={k: sample[k] for k in names},
                input_names=names,
                output_names=["logits"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            with _quiet_root_logger():
                quantize_dynamic(str(fp32), str(tmp / "model.onnx"), weight_type=QuantType.QInt8)
            fp32.unlink()
        tokenizer.save_pretrained(str(tmp))
        model.config.save_pretrained(str(tmp))
        info = {"source": str(getattr(model, "name_or_path", "")), "quantize": "int8" if quantize else None}
        (tmp / "rag_export.json").write_text(json.dumps(info, indent=2) + "\n")
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "model.onnx").is_file():  # not merely another process that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


# --------------------------------------------------------------------------- cache


class RerankerCache:
    """Loads each spec once per process (thread-safe) and remembers failures until ``reset``.

    ``get`` returns the reranker, ``None`` for ``none``, or raises ``ModelLoadError`` - the same
    message every time after a failed load, without trying again.
    """

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        max_length: int = 256,
        loader: Callable[..., Reranker | None] = load_reranker,
    ) -> None:
        self._cache_dir = cache_dir
        self._max_length = max_length
        self._loader = loader
        self._lock = threading.Lock()
        self._spec_locks: dict[_Key, threading.Lock] = {}
        self._loaded: dict[_Key, Reranker | None] = {}
        self._failed: dict[_Key, str] = {}

    def get(self, spec: str, *, cache_dir: Path | None = None, max_length: int | None = None) -> Reranker | None:
        """Return the reranker for ``spec``, loading it on first use; options default to the cache's."""
        key = self._key(spec, cache_dir, max_length)
        with self._lock:
            spec_lock = self._spec_locks.setdefault(key, threading.Lock())
        with spec_lock:
            if key in self._loaded:
                return self._loaded[key]
            if key in self._failed:
                raise ModelLoadError(self._failed[key])
            try:
                reranker = self._loader(key[0], cache_dir=key[1], max_length=key[2])
            except ModelLoadError as err:
                self._failed[key] = str(err)
                raise
            self._loaded[key] = reranker
            return reranker

    def failure(self, spec: str, *, cache_dir: Path | None = None, max_length: int | None = None) -> str | None:
        """The remembered reason ``spec`` failed to load, or ``None``."""
        return self._failed.get(self._key(spec, cache_dir, max_length))

    def reset(self, spec: str | None = None) -> None:
        """Forget one spec (or all), loaded or failed, so the next ``get`` loads again."""
        with self._lock:
            for store in (self._loaded, self._failed):
                for key in [k for k in store if spec is None or k[0] == spec.strip()]:
                    del store[key]

    def _key(self, spec: str, cache_dir: Path | None, max_length: int | None) -> _Key:
        return (spec.strip(), cache_dir or self._cache_dir, max_length or self._max_length)


# --------------------------------------------------------------------------- helpers


def _relevance(logits: Any) -> list[float]:
    import numpy as np

    array: npt.NDArray[np.float64] = np.asarray(logits, dtype=np.float64)
    if array.ndim == 2 and array.shape[1] == 2:
        array = array[:, 1] - array[:, 0]
    return [float(x) for x in array.reshape(-1)]


def _check_labels(model: str, num_labels: int) -> None:
    if num_labels not in (1, 2):
        raise ModelLoadError(f"reranker model {model} has {num_labels} labels; a cross-encoder needs 1 (or 2); {_FIX}")


def _offline() -> bool:
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _hub_endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _probe(url: str) -> str | None:
    """``None`` when ``url``'s server answers at all (any HTTP status) within ``PROBE_TIMEOUT_S``, else why not.

    Runs in a daemon thread so that a name lookup that hangs (which socket timeouts do not cover)
    cannot hold the caller past the timeout either.
    """
    timeout = PROBE_TIMEOUT_S
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
                outcome.append(None)
        except urllib.error.HTTPError:
            outcome.append(None)
        except Exception as err:
            reason = getattr(err, "reason", err)
            outcome.append(f"{type(reason).__name__}: {reason}".splitlines()[0])

    worker = threading.Thread(target=attempt, name="rag-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


def _resolve_source(name_or_path: str) -> str:
    """A local directory as a string, or a hub id; a path-like name that does not exist is an error."""
    local = Path(name_or_path).expanduser()
    if local.exists():
        if not local.is_dir():
            raise ModelLoadError(f"reranker model path {local} is not a directory; {_FIX}")
        return str(local)
    if not _HUB_ID.match(name_or_path):
        raise ModelLoadError(f"reranker model path {local} does not exist; {_FIX}")
    return name_or_path


def _load_local_or_hub(name: str, source: str, load: Callable[[bool], _T]) -> _T:
    """Load from disk or the local cache; download only when online and the hub answers a probe."""
    if Path(source).is_dir():
        return load(True)
    try:
        return load(True)  # the local Hugging Face cache
    except OSError:
        pass  # not cached: download below if we may
    if _offline():
        raise ModelLoadError(
            f"reranker model {name!r} is neither a local directory nor in the Hugging Face cache, and "
            f"offline mode is on (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): download it once online, or {_FIX}"
        )
    endpoint = _hub_endpoint()
    reason = _probe(f"{endpoint}/api/models/{source}")
    if reason is not None:
        raise ModelLoadError(
            f"reranker model {name!r} is not cached and {endpoint} is unreachable ({reason}); "
            f"download it once online, or {_FIX}"
        )
    return load(False)


@contextmanager
def _load_errors(model: str, *, hint: str = _FIX) -> Iterator[None]:
    """Turn any failure while loading into a one-line ``ModelLoadError`` naming the model."""
    try:
        yield
    except ModelLoadError:
        raise
    except Exception as err:
        first = (str(err).strip().splitlines() or [""])[0][:300]
        raise ModelLoadError(f"cannot load reranker model {model}: {type(err).__name__}: {first}; {hint}") from err


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """Stop third-party ``logging.basicConfig()``/``logging.warning()`` calls configuring the root logger."""
    root = logging.getLogger()
    guard = logging.NullHandler() if not root.handlers else None
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)


def _fingerprint(model: Any) -> str:
    """sha256 of the model's weights and label count: an export is reused only for identical weights."""
    import torch

    digest = hashlib.sha256(f"{model.config.model_type}:{model.config.num_labels}".encode())
    with torch.no_grad():
        for key, tensor in sorted(model.state_dict().items()):
            digest.update(key.encode())
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _download_flashrank(model_name: str, cache: Path) -> None:
    """Fetch FlashRank's zip for ``model_name`` into ``cache`` with bounded timeouts, atomically."""
    from flashrank.Config import model_url

    url = model_url.format(model_name)
    if os.environ.get("HF_ENDPOINT"):
        url = url.replace("https://huggingface.co", _hub_endpoint(), 1)
    if _offline():
        raise ModelLoadError(
            f"FlashRank model {model_name!r} is not in {cache} and offline mode is on "
            f"(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): put it there (from {url}), or {_FIX}"
        )
    reason = _probe(url)
    if reason is not None:
        raise ModelLoadError(
            f"FlashRank model {model_name!r} is not in {cache} and {url} is unreachable ({reason}); "
            f"put it there, or {_FIX}"
        )
    import requests

    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{model_name}-", dir=cache) as tmp:
            archive = Path(tmp) / "model.zip"
            with requests.get(url, stream=True, timeout=_DOWNLOAD_TIMEOUT_S) as response:
                response.raise_for_status()
                with archive.open("wb") as out:
                    for block in response.iter_content(chunk_size=1 << 16):
                        out.write(block)
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(tmp)
            extracted = Path(tmp) / model_name
            if not extracted.is_dir():
                raise ModelLoadError(f"FlashRank archive {url} holds no {model_name}/ directory; {_FIX}")
            try:
                extracted.rename(cache / model_name)
            except OSError:
                if not (cache / model_name).is_dir():
                    raise
    except ModelLoadError:
        raise
    except Exception as err:
        first = (str(err).strip().splitlines() or [""])[0][:200]
        raise ModelLoadError(
            f"cannot download FlashRank model {model_name!r} from {url} ({type(err).__name__}: {first}); "
            f"put it in {cache}, or {_FIX}"
        ) from err
