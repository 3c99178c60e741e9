"""A relevance score that means something without a cross-encoder, and the preset's floor on it.

The fused score ranks well but says nothing absolute: divided by the best one, the first result was
always 1.0, even for a question the documents cannot answer. Here each candidate gets a calibrated
relevance from the evidence the query already has, its cosine similarity to the query (every
candidate carries its embedding), read against a reference taken from the collection itself:

    relevance = sigmoid((cos - background_weight * background - center) / scale)

``background`` is how similar the query is to the collection as a whole: its cosine to the mean of a
sample of the collection's own chunk vectors (``CollectionReference``, read once per collection and
cached), weighed in proportion below ``FULL_BACKGROUND_CHUNKS`` chunks, where the passages that answer are
much of that mean. A question on the collection's general topic is somewhat similar to all of it, so a passage
must stand out from that to count; an unrelated question is far from all of it, and its nearest
passage is still far. The constants belong to the embedding model (its cosines have their own
scale), the same for every collection: for the bundled MiniLM chosen on the questions of three sets
asked of all three collections (docs/benchmarks.md, "issue 25.3"); nothing names a collection.
``center`` is where answerable and unanswerable first results were equally often misjudged (0.5),
``scale`` puts a tenth-percentile answerable first result at about 0.75. A model without a
``Calibration`` keeps the rank-normalised fused score, and no floor is applied
(``metrics.relevance`` says which).

When the cross-encoder reranks, its sigmoid is the relevance, as before. The ranking itself never
changes: ``finalize`` gives the results, in their ranked order, the running maximum of their
calibrated values from the bottom up (a result is at least as relevant as anything ranked below it),
so sorting by relevance keeps the order. The floor (``min_relevance``) gates the query on its first
result: below it, nothing is returned (the context says "no relevant passages"); at or above it, the
results after the first are kept down to ``TAIL_SHARE`` of it, so an answerable question keeps its
ranked list while the weak tail of every answer is still cut (docs/benchmarks.md, "Issue 25 point 3
on int8, session 10": one floor cutting every result either cost answerable questions or let
unanswerable ones through). A first result under a floor of at most 0.5 still passes when one of the first
results holds half of the question's words weighed by idf (``db.coverage``): the model scores some short,
answerable questions low, and their rare words are the evidence it misses (docs/benchmarks.md, "Session 27");
the list then keeps the results that reach the tail or hold half of the question themselves. Code is the
extreme case: a question naming an identifier has cosines of 0.1-0.3 to the function that defines it, so a
floor on the model's score alone refused 41% of answerable questions on a JavaScript corpus (docs/benchmarks.md,
"Session 56").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.db.coverage import held_shares
from rag_service.db.replicas import ReadRoute
from rag_service.db.vector_type import vector_from_send
from rag_service.embed import BUNDLED_MINILM_ID, bundled_model_id
from rag_service.forks import ChildLock
from rag_service.result import RetrievalMetrics, RetrievedChunk
from rag_service.retrieve.query import bm25_text, parse_query

#: chunks of a collection sampled for its reference (spread evenly over its ids)
REFERENCE_SAMPLE = 512
#: a reference of fewer chunks weighs its background in proportion, in full from this many: in a small collection
#: the passages that answer are much of the centroid (a one-chunk collection's background was its own passage's
#: cosine, and a question it answered word for word scored 14%). Chosen on small sub-collections of all three
#: visible sets, answerable questions against near misses (docs/benchmarks.md, "Session 39": 30 and 100 let more
#: near misses through); every visible collection samples 512 chunks, so is unchanged
FULL_BACKGROUND_CHUNKS = 10
#: a collection's reference is recomputed after this many seconds (its chunks may have changed)
REFERENCE_TTL_S = 300.0
#: once the first result passes ``min_relevance``, the results after it are kept down to this share of it
#: (0.5 until session 27: 0.4 kept answerable lists' relevant tails on two machines' vectors, all three sets)
TAIL_SHARE = 0.4
#: a first result below ``min_relevance`` still passes when one of the first ``HELD_RESULTS`` results holds
#: ``HELD_SHARE`` of the question's words, weighed by idf (``db.coverage``): short questions the model scores low but
#: whose rare words a passage holds (docs/benchmarks.md, "Session 27"), and questions naming code. Only for floors up
#: to ``LEXICAL_MAX_FLOOR`` (the stock ones): a caller asking for more than an even chance wants the model's own score
#: to reach it. The first result had to reach 0.7 of the floor until session 52 and 0.4 until session 56 (a
#: question naming a function scored 1-2% against its definition): no share of it changed an out-of-domain share
#: on the visible sets (docs/benchmarks.md, "Session 52" and "Session 56")
LEXICAL_MAX_FLOOR = 0.5
HELD_SHARE = 0.5
HELD_RESULTS = 3
#: ``finalize`` keeps the ranked order strict: each result is at least this much above the next
_STEP = 1e-6


@dataclass(frozen=True, slots=True)
class Calibration:
    """How one embedding model's cosine similarities become a relevance in 0..1."""

    #: the cosine (above ``background_weight`` of the background) at relevance 0.5
    center: float
    #: cosine over which relevance goes from 0.27 to 0.73 (the sigmoid's unit)
    scale: float
    #: share of the query's background similarity to the collection a passage must rise above
    background_weight: float

    def relevance(self, cosine: float, background: float) -> float:
        """The relevance of a passage at ``cosine`` to a query whose background similarity is ``background``."""
        return _sigmoid((cosine - self.background_weight * background - self.center) / self.scale)


#: the bundled all-MiniLM-L6-v2 (torch and ONNX fp32 give the same vectors; the int8 variant's differ
#: by little and was not measured on its own)
MINILM_CALIBRATION = Calibration(center=0.44, scale=0.06, background_weight=0.25)
#: the calibration of each embedding model (``Embedder.model_id``) it was measured for
CALIBRATIONS: dict[str, Calibration] = {
    BUNDLED_MINILM_ID: MINILM_CALIBRATION,
    bundled_model_id("onnx-int8"): MINILM_CALIBRATION,
}


@dataclass(frozen=True, slots=True)
class CollectionReference:
    """What a collection looks like to a query: the mean of (a sample of) its chunks' unit vectors."""

    centroid: npt.NDArray[np.float32]
    sampled: int

    def background(self, query_vector: npt.NDArray[Any]) -> float:
        """The query's mean cosine similarity to the collection's chunks, weighed by ``sampled`` up to
        ``FULL_BACKGROUND_CHUNKS`` (0 for an empty collection)."""
        if not self.sampled:
            return 0.0
        weight = min(1.0, self.sampled / FULL_BACKGROUND_CHUNKS)
        return weight * float(np.dot(self.centroid, _unit(query_vector)))


def _unit(vector: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    return (np.asarray(vector, dtype=np.float32) / norm) if norm > 0 else np.asarray(vector, dtype=np.float32)


_SAMPLE_SQL = text(
    "SELECT vector_send(embedding) FROM ("
    " SELECT embedding, row_number() OVER (ORDER BY id) AS n, count(*) OVER () AS total"
    " FROM document_chunks WHERE collection = :collection) AS numbered "
    "WHERE n % greatest(total / :sample, 1) = 0 LIMIT :sample"
)


def read_reference(session: Session, collection: str, *, sample: int = REFERENCE_SAMPLE) -> CollectionReference:
    """The reference of ``collection`` from ``sample`` of its chunks, evenly spread over their ids."""
    rows = session.execute(_SAMPLE_SQL, {"collection": collection, "sample": sample}).scalars().all()
    if not rows:
        return CollectionReference(np.zeros(0, dtype=np.float32), 0)
    vectors = np.stack([vector_from_send(row) for row in rows])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return CollectionReference(unit.mean(axis=0).astype(np.float32), len(rows))


class ReferenceCache:
    """Each collection's reference, read at its first query and again after ``ttl_s`` seconds."""

    def __init__(self, ttl_s: float = REFERENCE_TTL_S) -> None:
        self._ttl_s = ttl_s
        self._lock = ChildLock()
        self._entries: dict[str, tuple[float, CollectionReference]] = {}

    def get(self, session: Session, collection: str) -> CollectionReference:
        """The cached reference of ``collection``, read through ``session`` when missing or stale."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(collection)
        if entry is not None and now - entry[0] < self._ttl_s:
            return entry[1]
        reference = read_reference(session, collection)
        with self._lock:
            self._entries[collection] = (now, reference)
        return reference

    def clear(self) -> None:
        """Forget every reference (the next query of each collection reads it again)."""
        with self._lock:
            self._entries.clear()


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def score_candidates(
    chunks: Sequence[RetrievedChunk],
    query_vector: npt.NDArray[Any],
    reference: CollectionReference,
    calibration: Calibration,
) -> list[RetrievedChunk]:
    """``chunks`` with ``scores.calibrated`` set from their cosine similarity to the query.

    Set in place: each candidate's ``ChunkScores`` is its own, made by this query's search (copying
    every candidate twice was most of this stage's time).
    """
    scored = [c for c in chunks if c.embedding is not None]
    if scored:
        query = _unit(query_vector)
        background = reference.background(query)
        vectors = np.stack([c.embedding for c in scored if c.embedding is not None])
        norms = np.linalg.norm(vectors, axis=1)
        cosines = (vectors @ query) / np.where(norms > 0, norms, 1.0)
        for chunk, cosine in zip(scored, cosines.tolist(), strict=True):
            chunk.scores.calibrated = calibration.relevance(cosine, background)
    return list(chunks)


def section_evidence(chunks: Sequence[RetrievedChunk]) -> list[RetrievedChunk]:
    """Each section's first (best-ranked) child carries the best calibrated value of the section's children.

    ``parents.expand_to_parents`` keeps a section's first child's scores; its evidence is its best
    child's. Set in place on the first child's scores (see ``score_candidates``).
    """
    first: dict[tuple[int, int, int], RetrievedChunk] = {}
    for chunk in chunks:
        value = chunk.scores.calibrated
        if chunk.parent is None or value is None:
            continue
        key = (chunk.document_id, chunk.parent[1], chunk.parent[2])
        head = first.setdefault(key, chunk)
        if head.scores.calibrated is not None and value > head.scores.calibrated:
            head.scores.calibrated = value
    return list(chunks)


def applied_floor(floor: float, metrics: RetrievalMetrics, *, given: bool) -> float:
    """The ``min_relevance`` a call's results are held to: ``floor`` on a calibrated (or a reranker's) relevance,
    else none. A floor the call itself gave that cannot apply is a ``relevance`` line of ``metrics.degraded``; a
    preset's own floor (the stock ``agent`` and ``chatbot`` ones) stays quiet, ``metrics.relevance`` saying why."""
    if metrics.relevance != "uncalibrated":
        return floor
    if given and floor > 0:
        metrics.degrade(
            "relevance",
            f"min_relevance {floor:g} not applied: this embedding model's relevance is not calibrated (only the "
            f"bundled {BUNDLED_MINILM_ID}'s is), so no floor can tell an answerable question from another; enable a "
            "reranker (its scores take the floor) or leave min_relevance out",
        )
    return 0.0


def finalize(
    chunks: Sequence[RetrievedChunk],
    *,
    calibrate: bool,
    min_relevance: float,
    held_shares: Callable[[Sequence[RetrievedChunk]], Sequence[float]] | None = None,
) -> tuple[list[RetrievedChunk], list[RetrievedChunk]]:
    """The results in ranked order with their final relevance, gated and cut by ``min_relevance``.

    The order is the pipeline's (relevance descending, then position). With ``calibrate``, each
    result's relevance becomes the largest calibrated value at or below its rank (kept strictly
    decreasing, so the order survives any later sort by relevance); without it (a reranker ran, or
    no result has a calibrated value) the pipeline's relevance stays. A first result at or above ``min_relevance``
    keeps the results down to ``TAIL_SHARE`` of it. Below it, every result is dropped, unless the floor is at most
    ``LEXICAL_MAX_FLOOR`` and ``held_shares`` (asked only then: each result's share of the question's words) says
    one of the first ``HELD_RESULTS`` holds ``HELD_SHARE``: then the results that reach the tail or hold
    ``HELD_SHARE`` themselves are kept. Returns the kept results and the dropped ones, both in ranked order.
    """
    order = sorted(range(len(chunks)), key=lambda i: (-chunks[i].relevance_score, i))
    ranked = [chunks[i] for i in order]
    if calibrate and any(c.scores.calibrated is not None for c in ranked):
        values = [c.scores.calibrated if c.scores.calibrated is not None else 0.0 for c in ranked]
        level = -math.inf
        for i in range(len(ranked) - 1, -1, -1):
            level = min(max(values[i], level + _STEP), 1.0)
            ranked[i] = replace(ranked[i], relevance_score=level)
    tail = TAIL_SHARE * min_relevance
    if not ranked:
        return [], ranked
    if ranked[0].relevance_score >= min_relevance:
        keep = [c.relevance_score >= tail for c in ranked]
    else:
        shares = _shares(ranked, min_relevance=min_relevance, held_shares=held_shares)
        if max(shares[:HELD_RESULTS], default=0.0) < HELD_SHARE:
            return [], ranked
        keep = [c.relevance_score >= tail or share >= HELD_SHARE for c, share in zip(ranked, shares, strict=True)]
    kept = [c for c, k in zip(ranked, keep, strict=True) if k]
    return kept, [c for c, k in zip(ranked, keep, strict=True) if not k]


def _shares(
    ranked: Sequence[RetrievedChunk],
    *,
    min_relevance: float,
    held_shares: Callable[[Sequence[RetrievedChunk]], Sequence[float]] | None,
) -> list[float]:
    """Each result's share of the question's words, when a first result under the floor may pass on them (else
    none held)."""
    if held_shares is None or min_relevance > LEXICAL_MAX_FLOOR:
        return [0.0] * len(ranked)
    return list(held_shares(ranked))


def held_shares_reader(
    route: ReadRoute, collection: str, fts_config: str, query: str
) -> Callable[[Sequence[RetrievedChunk]], list[float]]:
    """``finalize``'s ``held_shares`` for the user's own words of ``query`` (those BM25 scores, not its expansions):
    one short read through the call's ``route``, the query parsed and read only when ``finalize`` asks."""

    def shares(chunks: Sequence[RetrievedChunk]) -> list[float]:
        words = bm25_text(parse_query(query))
        ids = [c.chunk_id for c in chunks]
        found = route.read(
            lambda s: held_shares(s, collection=collection, fts_config=fts_config, words=words, chunk_ids=ids)
        )
        return [found[i] for i in ids]

    return shares


def no_relevant_passages(query: str, best: float | None, min_relevance: float) -> str:
    """The one line a context holds when the first result (at ``best``) was below ``min_relevance``, or when no
    chunk matched at all (``best`` None: stop words only, filters that hold nothing). The question is quoted as asked
    (its whitespace folded), not as a Python literal: the line is read by people and LLMs."""
    shown = " ".join(query.split())
    shown = shown if len(shown) <= 200 else shown[:199] + "…"
    if best is None:
        return (
            f"no relevant passages for '{shown}': no chunk matched it (ask with other words, widen the filters, "
            "or search another collection)"
        )
    return (
        f"no relevant passages for '{shown}': the best relevance was {best:.0%}, below min_relevance "
        f"{min_relevance:.0%} (ask differently, search another collection, or lower min_relevance)"
    )
