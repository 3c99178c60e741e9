"""``load_reranker``: ``RAG_RERANK_MODEL`` to a backend; ``RerankerCache``: each spec loaded once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag_service.config import Settings, load_settings
from rag_service.errors import ModelLoadError
from rag_service.forks import ChildLock
from rag_service.knobs import RERANK_MODEL
from rag_service.retrieve.rerank.base import FIX, RERANK_MAX_LENGTH, Reranker
from rag_service.retrieve.rerank.cross_encoder import CrossEncoderReranker
from rag_service.retrieve.rerank.flashrank_model import FlashRankReranker
from rag_service.retrieve.rerank.onnx_model import load_onnx

#: the default of ``RAG_RERANK_MODEL`` (``knobs.RERANK_MODEL``), a short name of the ONNX cross-encoder below
DEFAULT_RERANK_MODEL: str = RERANK_MODEL.default
_ALIASES = {DEFAULT_RERANK_MODEL.lower(): "onnx:cross-encoder/ms-marco-MiniLM-L-6-v2"}
_Key = tuple[str, Path | None, int]


def default_cache_dir(settings: Settings | None = None) -> Path:
    """``Settings.data_dir / "models"`` (``.rag_data/models`` by default): FlashRank models and ONNX exports."""
    return (settings or load_settings()).data_dir / "models"


def load_reranker(spec: str, *, cache_dir: Path | None = None, max_length: int = RERANK_MAX_LENGTH) -> Reranker | None:
    """Load the reranker named by ``spec`` (see the module doc); ``None`` when it is ``none``.

    Raises ``ModelLoadError`` with a one-line reason when the model cannot be loaded.
    """
    text = spec.strip()
    if not text:
        raise ModelLoadError(f"RAG_RERANK_MODEL is empty; use a model name or path, or 'none'; {FIX}")
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
        raise ModelLoadError(f"reranker spec {spec!r} names no model after '{prefix}:'; {FIX}")
    cache = (cache_dir or default_cache_dir()).expanduser()
    if backend == "flashrank":
        return FlashRankReranker(target, cache_dir=cache / "flashrank", max_length=max_length)
    if backend == "cross-encoder":
        return CrossEncoderReranker(target, max_length=max_length)
    return load_onnx(target, cache_dir=cache / "onnx", max_length=max_length)


class RerankerCache:
    """Loads each spec once per process (thread-safe) and remembers failures until ``reset``.

    ``get`` returns the reranker, ``None`` for ``none``, or raises ``ModelLoadError`` - the same
    message every time after a failed load, without trying again.
    """

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        max_length: int = RERANK_MAX_LENGTH,
        loader: Callable[..., Reranker | None] = load_reranker,
    ) -> None:
        self._cache_dir = cache_dir
        self._max_length = max_length
        self._loader = loader
        self._lock = ChildLock()
        self._spec_locks: dict[_Key, ChildLock] = {}
        self._loaded: dict[_Key, Reranker | None] = {}
        self._failed: dict[_Key, str] = {}

    def get(self, spec: str, *, cache_dir: Path | None = None, max_length: int | None = None) -> Reranker | None:
        """Return the reranker for ``spec``, loading it on first use; options default to the cache's."""
        key = self._key(spec, cache_dir, max_length)
        with self._lock:
            spec_lock = self._spec_locks.get(key) or self._spec_locks.setdefault(key, ChildLock())
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

    def reset(self, spec: str | None = None) -> None:
        """Forget one spec (or all), loaded or failed, so the next ``get`` loads again."""
        with self._lock:
            for store in (self._loaded, self._failed):
                for key in [k for k in store if spec is None or k[0] == spec.strip()]:
                    del store[key]

    def _key(self, spec: str, cache_dir: Path | None, max_length: int | None) -> _Key:
        return (spec.strip(), cache_dir or self._cache_dir, max_length or self._max_length)
