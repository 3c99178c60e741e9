"""What every reranker is: the protocol, the score record, the one NaN-safe ordering of scores."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rag_service.errors import ConfigurationError, ModelLoadError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

FIX = "set RAG_RERANK_MODEL to a local model directory, or to 'none' to turn reranking off"
#: tokens of one (query, passage) pair the cross-encoder reads (longer pairs are truncated)
RERANK_MAX_LENGTH = 256
#: pairs scored per model call
RERANK_BATCH_SIZE = 32


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


def ranked_order(scores: Sequence[float]) -> list[int]:
    """Indices of ``scores`` best first; NaN scores last, ties in input order. The one place scores are sorted."""
    return sorted(
        range(len(scores)), key=lambda i: (math.isnan(scores[i]), -scores[i] if not math.isnan(scores[i]) else 0.0, i)
    )


def rerank(reranker: Reranker, query: str, documents: Sequence[str], *, top_k: int) -> list[RerankScore]:
    """Score ``documents`` and return the best ``top_k``, highest score first, ties in input order."""
    if top_k < 1:
        raise ConfigurationError(f"top_k ({top_k}) must be at least 1")
    if not documents:
        return []
    scores = reranker.score(query, documents)
    if len(scores) != len(documents):
        raise ValueError(f"{reranker.name} returned {len(scores)} scores for {len(documents)} documents")
    return [RerankScore(index=i, score=float(scores[i])) for i in ranked_order(scores)[:top_k]]


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


def relevance(logits: Any) -> list[float]:
    """Raw relevance per pair from a model's logits: the single logit, or ``logit[1] - logit[0]``."""
    import numpy as np

    array: npt.NDArray[np.float64] = np.asarray(logits, dtype=np.float64)
    if array.ndim == 2 and array.shape[1] == 2:
        array = array[:, 1] - array[:, 0]
    return [float(x) for x in array.reshape(-1)]


def check_labels(model: str, num_labels: int) -> None:
    """ModelLoadError unless the model has the 1 (or 2) labels of a cross-encoder."""
    if num_labels not in (1, 2):
        raise ModelLoadError(f"reranker model {model} has {num_labels} labels; a cross-encoder needs 1 (or 2); {FIX}")
