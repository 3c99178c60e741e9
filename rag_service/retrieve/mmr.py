"""Maximal marginal relevance: pick chunks that are relevant and unlike the ones already picked.

With ``lam = 1 - diversity``, each step picks::

    argmax_i  lam * relevance[i] - (1 - lam) * max_{j picked} cos(e_i, e_j)

The first pick is always the most relevant chunk (nothing is picked yet, so there is no penalty;
this also holds at ``diversity == 1``). Ties go to the lower index, so pass candidates best first.
Vectors of any norm are taken (cosine is computed on unit vectors; a zero vector is similar to
nothing). Cost: one ``n x d`` matrix-vector product per pick, O(k * n * d) overall.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_service.errors import ConfigurationError
from rag_service.result import RetrievedChunk


def check_diversity(diversity: float) -> float:
    """``diversity`` as a float; ``ConfigurationError`` unless it is a number in 0..1."""
    try:
        value = float(diversity)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(diversity, bool | str | bytes) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(
            f"diversity ({diversity!r}) must be between 0 and 1; 0 keeps relevance order, "
            "higher values favour diverse chunks"
        )
    return value


def mmr_select(
    relevance: Sequence[float],
    embeddings: npt.NDArray[np.floating[Any]],
    *,
    k: int,
    diversity: float,
) -> list[int]:
    """Indices of up to ``k`` candidates in selection order (see the module docstring).

    ``relevance[i]`` scores row ``i`` of ``embeddings`` (shape ``n x d``); relevance is expected in
    0..1 so that it is on the cosine's scale. ``diversity == 0`` returns the ``k`` most relevant in
    relevance order (stable); higher values trade relevance for novelty.
    """
    lam = 1.0 - check_diversity(diversity)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise ConfigurationError(f"k ({k!r}) must be an integer >= 0; pass the number of chunks wanted")
    rel = np.asarray(relevance, dtype=np.float64)
    vectors = np.asarray(embeddings, dtype=np.float64)
    if rel.ndim != 1 or vectors.ndim != 2 or vectors.shape[0] != rel.shape[0]:
        raise ValueError(
            f"relevance has shape {rel.shape} and embeddings {vectors.shape}; "
            "pass one relevance score per embedding row (n and n x d)"
        )
    n = rel.shape[0]
    k = min(int(k), n)
    if k == 0:
        return []
    if lam == 1.0:
        order = np.lexsort((np.arange(n), -rel))  # relevance descending, then index
        return [int(i) for i in order[:k]]

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    first = int(np.argmax(rel))
    selected = [first]
    max_sim = unit @ unit[first]
    mmr = np.empty(n, dtype=np.float64)
    while len(selected) < k:
        np.multiply(lam, rel, out=mmr)
        mmr -= (1.0 - lam) * max_sim
        mmr[selected] = -np.inf
        pick = int(np.argmax(mmr))
        selected.append(pick)
        np.maximum(max_sim, unit @ unit[pick], out=max_sim)
    return selected


def diversified(chunks: Sequence[RetrievedChunk], k: int, *, diversity: float) -> list[RetrievedChunk]:
    """The first ``k`` of ``chunks`` (best first) in MMR order, by their embeddings (relevance order without any)."""
    if len(chunks) <= 1 or all(c.embedding is None for c in chunks):
        return list(chunks[:k])
    dim = next(c.embedding.shape[0] for c in chunks if c.embedding is not None)
    vectors = np.stack([c.embedding if c.embedding is not None else np.zeros(dim) for c in chunks])
    picked = mmr_select([c.relevance_score for c in chunks], vectors, k=k, diversity=diversity)
    return [chunks[i] for i in picked]
