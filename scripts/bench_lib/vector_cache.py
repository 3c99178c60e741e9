"""Sentence vectors cached on disk by text hash, so a second run embeds nothing.

The cache is a folder of ``.npz`` parts (``keys``: SHA-256 hex of each text, ``vectors``: float32),
one per batch written, each written to a temporary name and renamed: an interrupted run keeps every
batch it finished. The folder name carries the model's name, so vectors of two models never mix.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

Matrix = npt.NDArray[np.float32]
SAVE_EVERY = 256


def text_key(text: str) -> str:
    """The cache key of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorCache:
    """Vectors of one model under ``folder``; ``vectors(texts)`` embeds only the texts it has not seen."""

    def __init__(self, folder: Path, load_model: Callable[[], Any]) -> None:
        self.folder = folder
        self._load_model = load_model
        self._model: Any = None
        self.embedded = 0
        self._known: dict[str, npt.NDArray[np.float32]] = {}
        folder.mkdir(parents=True, exist_ok=True)
        for part in sorted(p for p in folder.glob("*.npz") if not p.name.startswith(".")):
            with np.load(part) as data:
                for key, vector in zip(data["keys"].tolist(), data["vectors"], strict=True):
                    self._known[str(key)] = vector

    def __len__(self) -> int:
        return len(self._known)

    def vectors(self, texts: Sequence[str], *, desc: str = "embedding") -> Matrix:
        """One unit vector per text (rows in order), embedding and saving the missing ones in batches."""
        keys = [text_key(t) for t in texts]
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._known:
                missing.setdefault(key, text)
        if missing:
            pending = list(missing.items())
            if self._model is None:
                self._model = self._load_model()
            with tqdm(total=len(pending), desc=desc, unit="text") as bar:
                for start in range(0, len(pending), SAVE_EVERY):
                    batch = pending[start : start + SAVE_EVERY]
                    encoded = self._model.encode(
                        [text for _, text in batch], batch_size=32, normalize_embeddings=True, convert_to_numpy=True
                    ).astype(np.float32)
                    self._save([key for key, _ in batch], encoded)
                    for (key, _), vector in zip(batch, encoded, strict=True):
                        self._known[key] = vector
                    self.embedded += len(batch)
                    bar.update(len(batch))
        return np.stack([self._known[k] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def _save(self, keys: list[str], vectors: Matrix) -> None:
        name = uuid.uuid4().hex
        temporary = self.folder / f"{name}.part"  # not matched by the loader's *.npz until renamed
        with temporary.open("wb") as out:
            np.savez(out, keys=np.array(keys), vectors=vectors)
        os.replace(temporary, self.folder / f"{name}.npz")


def minilm_cache(root: Path) -> VectorCache:
    """The cache of the bundled all-MiniLM-L6-v2 (sentence-transformers, CPU, loaded on first need) under ``root``."""

    def load() -> Any:
        from sentence_transformers import SentenceTransformer

        from rag_service.embed import bundled_model_path

        return SentenceTransformer(str(bundled_model_path()), device="cpu")

    return VectorCache(root / "all-MiniLM-L6-v2", load)
