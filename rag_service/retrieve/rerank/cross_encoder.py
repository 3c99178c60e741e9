"""The sentence-transformers ``CrossEncoder`` backend (torch, fp32)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_service.forks import ChildLock
from rag_service.retrieve.rerank.base import RERANK_BATCH_SIZE, RERANK_MAX_LENGTH, check_labels, relevance
from rag_service.retrieve.rerank.hub import load_errors, load_local_or_hub, resolve_source


class CrossEncoderReranker:
    """sentence-transformers ``CrossEncoder`` on the CPU (torch, fp32); raw logits as scores."""

    def __init__(
        self,
        name_or_path: str | Path,
        *,
        max_length: int = RERANK_MAX_LENGTH,
        batch_size: int = RERANK_BATCH_SIZE,
        device: str = "cpu",
    ) -> None:
        source = resolve_source(str(name_or_path))  # a missing path fails before torch is imported (~8 s)
        from sentence_transformers import CrossEncoder

        def load(local_files_only: bool) -> Any:
            return CrossEncoder(source, device=device, max_length=max_length, local_files_only=local_files_only)

        with load_errors(str(name_or_path)):
            self._model = load_local_or_hub(str(name_or_path), source, load)
            num_labels = int(self._model.num_labels)
        check_labels(str(name_or_path), num_labels)
        self.name = f"cross-encoder:{name_or_path}"
        self.returns_logits = True
        self._batch_size = batch_size
        self._lock = ChildLock()

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
        return relevance(logits)
