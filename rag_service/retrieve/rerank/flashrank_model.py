"""The FlashRank backend: its pairwise ONNX models, downloaded once with bounded timeouts."""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from rag_service.errors import ModelLoadError, first_line
from rag_service.forks import ChildLock
from rag_service.log import quiet_root_logger
from rag_service.onnx_runtime import load_onnxruntime
from rag_service.retrieve.rerank.base import FIX, RERANK_BATCH_SIZE, RERANK_MAX_LENGTH, relevance
from rag_service.retrieve.rerank.hub import (
    DOWNLOAD_TIMEOUT_S,
    hub_endpoint,
    load_errors,
    offline,
    probe,
)


class FlashRankReranker:
    """A FlashRank pairwise ONNX model (e.g. ``ms-marco-MiniLM-L-12-v2``) kept in ``cache_dir``.

    A model missing from ``cache_dir`` is downloaded once from FlashRank's repository, with short
    timeouts, unless offline mode is on; a failed download raises ``ModelLoadError`` at once.
    """

    def __init__(
        self,
        model_name: str,
        *,
        cache_dir: str | Path,
        max_length: int = RERANK_MAX_LENGTH,
        batch_size: int = RERANK_BATCH_SIZE,
    ) -> None:
        load_onnxruntime()  # flashrank loads it: with the product's settings first
        from flashrank import Ranker
        from flashrank.Config import listwise_rankers, model_file_map

        if model_name not in model_file_map or model_name in listwise_rankers:
            known = ", ".join(sorted(set(model_file_map) - set(listwise_rankers)))
            raise ModelLoadError(f"unknown FlashRank model {model_name!r}; use one of: {known}")
        cache = Path(cache_dir).expanduser()
        if not (cache / model_name / model_file_map[model_name]).is_file():
            download_flashrank(model_name, cache)
        # Ranker() calls logging.basicConfig(): keep it from configuring the application's logging
        hint = f"delete {cache / model_name} to download it again, or {FIX}"
        with load_errors(f"flashrank:{model_name}", hint=hint), quiet_root_logger():
            ranker = Ranker(model_name=model_name, cache_dir=str(cache), max_length=max_length)
        self._session = ranker.session
        self._tokenizer = ranker.tokenizer
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._batch_size = batch_size
        self._lock = ChildLock()
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
                out.extend(relevance(self._session.run(None, feed)[0]))
        return out


def download_flashrank(model_name: str, cache: Path) -> None:
    """Fetch FlashRank's zip for ``model_name`` into ``cache`` with bounded timeouts, atomically."""
    from flashrank.Config import model_url

    url = model_url.format(model_name)
    if os.environ.get("HF_ENDPOINT"):
        url = url.replace("https://huggingface.co", hub_endpoint(), 1)
    if offline():
        raise ModelLoadError(
            f"FlashRank model {model_name!r} is not in {cache} and offline mode is on "
            f"(HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): put it there (from {url}), or {FIX}"
        )
    reason = probe(url)
    if reason is not None:
        raise ModelLoadError(
            f"FlashRank model {model_name!r} is not in {cache} and {url} is unreachable ({reason}); "
            f"put it there, or {FIX}"
        )
    import requests

    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{model_name}-", dir=cache) as tmp:
            archive = Path(tmp) / "model.zip"
            with requests.get(url, stream=True, timeout=DOWNLOAD_TIMEOUT_S) as response:
                response.raise_for_status()
                with archive.open("wb") as out:
                    for block in response.iter_content(chunk_size=1 << 16):
                        out.write(block)
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(tmp)
            extracted = Path(tmp) / model_name
            if not extracted.is_dir():
                raise ModelLoadError(f"FlashRank archive {url} holds no {model_name}/ directory; {FIX}")
            try:
                extracted.rename(cache / model_name)
            except OSError:
                if not (cache / model_name).is_dir():
                    raise
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(
            f"cannot download FlashRank model {model_name!r} from {url} ({first_line(err, limit=200, typed=True)}); "
            f"put it in {cache}, or {FIX}"
        ) from err
