"""The retrieval pipeline: focus -> expand -> embed -> hybrid SQL -> merge -> rerank -> parents -> context -> MMR ->
format.

Each stage is timed into ``RetrievalMetrics``; a stage that cannot run as configured (the reranker
model cannot be loaded) is skipped and reported in ``metrics.degraded``, never faked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy.orm import Session

from rag_service.config import MAX_CANDIDATE_K, Preset, Settings, llm_rerank_weights
from rag_service.db.database import Database
from rag_service.db.parallel_search import fused_search
from rag_service.db.presets import CallPreset
from rag_service.db.replicas import ReadRoute, ReadRouter
from rag_service.db.search import ChunkFilters, SearchHit, SearchRequest
from rag_service.db.search_request import ef_search_for, with_query_scores
from rag_service.embed import Embedder, degraded_note
from rag_service.errors import LLMError, ModelLoadError
from rag_service.format import budget_shortfall, fit_line, format_context
from rag_service.overlaps import first_passages
from rag_service.records import from_fields
from rag_service.result import NO_RERANKER, ChunkScores, RAGResult, RetrievalMetrics, RetrievedChunk
from rag_service.retrieve.context import add_context, context_applies
from rag_service.retrieve.definitions import add_definitions
from rag_service.retrieve.depth import deeper
from rag_service.retrieve.focus import focus_query
from rag_service.retrieve.fusion import max_linear_score, max_rrf_score, rrf_merge_lists
from rag_service.retrieve.graph import graph_rerank
from rag_service.retrieve.mmr import diversified
from rag_service.retrieve.parents import dedupe, expand_to_parents, parent_map
from rag_service.retrieve.phrases import phrases_as_words
from rag_service.retrieve.query import (
    bm25_text,
    bounds_note,
    cut_note,
    excluded_terms,
    parse_query,
    validate_query,
    websearch_parts,
)
from rag_service.retrieve.relevance import (
    CALIBRATIONS,
    Calibration,
    ReferenceCache,
    applied_floor,
    finalize,
    held_shares_reader,
    no_relevant_passages,
    score_candidates,
    section_evidence,
)
from rag_service.retrieve.rerank import Reranker, ranked_order
from rag_service.retrieve.spelling import respell
from rag_service.retrieve.unreadable import query_window, readable_embedder, window_note
from rag_service.retrieve.variants import expand_query
from rag_service.retrieve.windows import fit_parents

if TYPE_CHECKING:
    from rag_service.llm import ChatModel

RerankerSource = Callable[[], Reranker | None]
#: reads a call's ``CallPreset`` (its preset with the call's overrides, validated) in the search transaction
SetupReader = Callable[[Session], CallPreset]
#: the configured LLM (None: none configured); called only when the LLM rerank is switched on
ChatSource = Callable[[], "ChatModel | None"]
#: with ``return_parents``, each arm reads at least this many children per result asked for: children
#: are grouped into sections, and ``max_chunks`` sections need more children than ``max_chunks``
#: (ray-docs-qa, max_chunks 10: depth 40 instead of 20 gained 0.012 nDCG@10; docs/benchmarks.md)
CHILDREN_PER_SECTION = 4


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A query made ready for the search under one preset: the text searched (``focus``), its requests, its first
    vector, the calibration."""

    setup: CallPreset
    text: str
    requests: list[SearchRequest]
    vector: np.ndarray[Any, Any] | None
    calibration: Calibration | None


@dataclass(frozen=True, slots=True)
class RetrievalOptions:
    """Per-call settings beyond the preset."""

    collection: str = "default"
    filters: ChunkFilters = field(default_factory=ChunkFilters)
    ask_llm: bool = True  #: False: no LLM rerank (a warm-up makes no call nobody asked for)


class Retriever:
    """Runs one query through every stage; holds no per-query state."""

    def __init__(
        self,
        db: Database,
        embedder: Callable[[], Embedder],
        reranker: RerankerSource,
        settings: Settings,
        *,
        reads: ReadRouter | None = None,
        chat: ChatSource | None = None,
    ) -> None:
        self.db = db
        self.reads = reads or ReadRouter(db)
        self._embedder = embedder
        self._reranker = reranker
        self._chat = chat
        self.settings = settings
        self._llm_weights = llm_rerank_weights(settings.llm_rerank_weights)
        self.references = ReferenceCache()

    def search_candidates(
        self,
        query: str,
        read_setup: SetupReader,
        options: RetrievalOptions,
        metrics: RetrievalMetrics,
        route: ReadRoute | None = None,
    ) -> tuple[CallPreset, list[RetrievedChunk], str]:
        """The call's preset, the fused candidates of every query variant (merged and de-duplicated, best first) and
        the text searched: ``query`` focused on its question (``retrieve.focus``).

        One read transaction: the preset and the collection's size (``read_setup``), then the query
        embedding, then the search, so a query pays one BEGIN/COMMIT. It reads through ``route`` (a
        replica, else the primary); where it ran and every fallback of the call are reported in ``metrics``.
        """
        prepared: list[_Prepared] = []  # a retried read reuses the first attempt's embeddings

        def search(session: Session) -> tuple[CallPreset, list[RetrievedChunk], str]:  # one snapshot throughout
            setup = read_setup(session)
            preset = setup.preset
            if not prepared or prepared[0].setup != setup:
                prepared[:] = [self._prepare(query, setup, options, metrics, session)]
            requests, vector, calibration = prepared[0].requests, prepared[0].vector, prepared[0].calibration
            started = time.perf_counter()
            per_variant = [fused_search(session, r) for r in requests]
            chunks = _merge(per_variant, preset, options.collection)
            while (more := deeper(requests, per_variant, len(chunks), preset.max_chunks)) is not None:
                requests, per_variant = more, [fused_search(session, r) for r in more]  # repeated texts: read on
                chunks = _merge(per_variant, preset, options.collection)
            chunks = add_definitions(chunks, prepared[0].text, self.settings.definition_weight)  # code: names asked
            if not preset.return_parents:  # results are chunks: each one's context joins its fused relevance
                chunks = add_context(chunks, self.settings.context_weights)
            if preset.graph_weight > 0:
                graph_started = time.perf_counter()
                chunks, metrics.graph_added = graph_rerank(
                    session, chunks, request=requests[0], weight=preset.graph_weight, metrics=metrics
                )
                metrics.graph_time_ms = _ms(graph_started)
            metrics.total_candidates = len(chunks)  # what the later stages rank: the graph's additions included
            if calibration is not None and vector is not None:  # the calibrated relevance: retrieve/relevance.py
                metrics.relevance = "calibrated"
                if chunks:
                    reference = self.references.get(session, options.collection)
                    chunks = score_candidates(chunks, vector, reference, calibration)
            metrics.retrieval_time_ms = _ms(started) - metrics.graph_time_ms  # the SQL, as before the graph
            return setup, chunks, prepared[0].text

        route = route or self.reads.route()
        found = route.read(search)
        metrics.read_from = route.served_by
        for note in route.notes:
            metrics.degrade("read", note)
        return found

    def _prepare(
        self, query: str, setup: CallPreset, options: RetrievalOptions, metrics: RetrievalMetrics, session: Session
    ) -> _Prepared:
        """The query focused, its variants embedded and made into search requests (phrases no chunk holds as words)."""
        preset = setup.preset
        model = self._embedder() if preset.vector_weight > 0 else None
        focus = focus_query(query, window=partial(query_window, model))  # the window: only where the vector arm runs
        if focus.note:
            metrics.degrade("query", focus.note)
        query = respell(session, focus.text, options.collection, self.settings, metrics, self._embedder())
        started = time.perf_counter()
        variants = expand_query(query) if preset.expand_query else [query]
        metrics.query_variants = len(variants)
        metrics.expansion_time_ms = _ms(started)
        parsed, probe = parse_query(query), self._request(query, None, setup, options)
        as_words = phrases_as_words(session, probe, parsed.phrases, metrics)
        parsed = parse_query(query, as_words=as_words) if as_words else parsed
        if probe.runs_keyword and (note := bounds_note(parsed)):
            metrics.degrade("query", note)  # the keyword arm's bounds: nothing to say for a vector-only call

        vectors: list[np.ndarray[Any, Any] | None] = [None] * len(variants)
        calibration = None
        embedder = readable_embedder(query, model, metrics) if model is not None else None
        if embedder is not None:
            started = time.perf_counter()
            vectors = [embedder.embed_query(v) for v in variants]
            metrics.embedding_time_ms = _ms(started)
            for note in (degraded_note(embedder), window_note(query, embedder)):
                if note:
                    metrics.degrade("embed", note)
            calibration = CALIBRATIONS.get(embedder.model_id)
        requests = [self._request(v, vec, setup, options, as_words) for v, vec in zip(variants, vectors, strict=True)]
        # the merge keeps the user's query's context scores alone (with_query_scores): the variants skip them
        requests[1:] = [replace(r, context_bm25=False, proximity=False, context_vector=False) for r in requests[1:]]
        return _Prepared(setup, query, requests, vectors[0], calibration)

    def _request(
        self,
        variant: str,
        vector: np.ndarray[Any, Any] | None,
        setup: CallPreset,
        options: RetrievalOptions,
        as_words: Sequence[str] = (),
    ) -> SearchRequest:
        preset = setup.preset
        parsed = parse_query(variant, as_words=as_words)
        any_terms, required = websearch_parts(parsed)
        # never fewer candidates than results asked for: max_chunks=50 of a preset reading 20 returned 20
        asked = CHILDREN_PER_SECTION * preset.max_chunks if preset.return_parents else preset.max_chunks
        depth = max(preset.candidate_k, min(asked, MAX_CANDIDATE_K))
        return SearchRequest(
            collection=options.collection,
            query_vector=vector,
            any_terms=any_terms,
            required_terms=required,
            excluded_terms=excluded_terms(parsed),
            vector_weight=preset.vector_weight,
            keyword_weight=preset.keyword_weight,
            rrf_k=preset.rrf_k,
            fusion_method=preset.fusion_method,
            candidate_k=depth,
            limit=depth,
            fts_config=self.settings.fts_config,
            ef_search=ef_search_for(setup.collection_chunks, base=self.settings.hnsw_ef_search, depth=depth),
            exact_search_below=self.settings.exact_search_below,
            filters=options.filters,
            keyword_scorer=preset.keyword_scorer,
            bm25_text=bm25_text(parsed),
            bm25_k1=self.settings.bm25_k1,
            bm25_b=self.settings.bm25_b,
            bm25_max_postings=self.settings.bm25_max_postings,
            packed_postings=setup.packed_postings,
            parallel_arms=0 < self.settings.parallel_arms_from <= setup.collection_chunks,
            context_bm25=context_applies(self.settings.context_weight, preset.vector_weight),
            proximity=context_applies(self.settings.proximity_weight, preset.vector_weight),
            context_vector=context_applies(self.settings.context_vector_weight, preset.vector_weight),
        )

    def ranked_candidates(
        self, query: str, read_setup: SetupReader, options: RetrievalOptions, *, route: ReadRoute | None = None
    ) -> tuple[list[RetrievedChunk], RetrievalMetrics]:
        """Fused (and, if enabled, reranked) candidates before parents, MMR and formatting."""
        _, chunks, metrics, _ = self._ranked(validate_query(query), cut_note(query), read_setup, options, route)
        return chunks, metrics

    def _ranked(
        self, text: str, cut: str | None, read_setup: SetupReader, options: RetrievalOptions, route: ReadRoute | None
    ) -> tuple[CallPreset, list[RetrievedChunk], RetrievalMetrics, str]:
        """The validated ``text``'s candidates, reranked, and the text searched; ``cut``: ``cut_note``'s line."""
        total_started = time.perf_counter()
        metrics = RetrievalMetrics()
        if cut:
            metrics.degrade("query", cut)
        setup, chunks, text = self.search_candidates(text, read_setup, options, metrics, route)
        metrics.settings = setup.preset.knob_values()
        chunks = self._rerank(text, chunks, setup.preset, metrics)
        if setup.preset.rerank_enabled and options.ask_llm:  # rerank_enabled false is no rerank, by the LLM neither
            chunks = self._llm_rerank(text, chunks, metrics)
        metrics.after_rerank = len(chunks)
        metrics.total_time_ms = _ms(total_started)
        return setup, chunks, metrics, text

    def retrieve(
        self,
        query: str,
        read_setup: SetupReader,
        options: RetrievalOptions,
        *,
        encoding: str = "cl100k_base",
        route: ReadRoute | None = None,
    ) -> RAGResult:
        """The whole pipeline for one query; ``read_setup`` reads the call's preset in its search
        transaction, ``route`` carries the call's reads (see ``db.replicas``)."""
        total_started = time.perf_counter()
        text = validate_query(query)
        route = route or self.reads.route()  # the search and the relevance floor's read on the same server
        setup, chunks, metrics, searched = self._ranked(text, cut_note(query), read_setup, options, route)
        preset = setup.preset

        started = time.perf_counter()
        if preset.return_parents:
            chunks = expand_to_parents(section_evidence(chunks), parent_map(chunks))
            if metrics.reranker == NO_RERANKER:  # a reranker's order stands
                chunks = add_context(chunks, self.settings.context_weights)
        metrics.parents_time_ms = _ms(started)

        started = time.perf_counter()
        pick = partial(diversified, chunks, diversity=preset.diversity)
        chunks = first_passages(pick, preset.max_chunks, len(chunks))
        metrics.mmr_time_ms = _ms(started)
        # the cross-encoder's (or the LLM's) relevance stands; else each result's calibrated one, if any
        if metrics.reranker != NO_RERANKER:
            metrics.relevance = "reranker"
        floor = applied_floor(preset.min_relevance, metrics, given=setup.floor_given)
        held = held_shares_reader(route, options.collection, self.settings.fts_config, searched)
        calibrated = metrics.relevance == "calibrated"
        chunks, dropped = finalize(chunks, calibrate=calibrated, min_relevance=floor, held_shares=held)
        metrics.filtered_below_relevance = len(dropped)
        if preset.return_parents:
            started = time.perf_counter()
            chunks = fit_parents(
                chunks, max_tokens=preset.max_tokens, encoding=encoding, show_metadata=preset.show_metadata
            )
            metrics.parents_time_ms += _ms(started)

        started = time.perf_counter()
        formatted = format_context(
            chunks, max_tokens=preset.max_tokens, encoding=encoding, show_metadata=preset.show_metadata
        )
        metrics.format_time_ms = _ms(started)
        metrics.total_time_ms = _ms(total_started)
        context, tokens = formatted.text, formatted.total_tokens
        if not chunks:  # every result under the floor, or none at all: one line says which, not ""
            line = no_relevant_passages(searched, dropped[0].relevance_score if dropped else None, preset.min_relevance)
            context, tokens = fit_line(line, max_tokens=preset.max_tokens, encoding=encoding)
        elif starved := budget_shortfall(
            chunks, formatted, max_tokens=preset.max_tokens, encoding=encoding, show_metadata=preset.show_metadata
        ):
            metrics.degrade("format", starved)
        return RAGResult(
            chunks=sorted(formatted.included, key=lambda c: -c.relevance_score),  # ranked; the context groups by source
            formatted_context=context,
            total_tokens=tokens,
            sources=formatted.sources,
            query=text,
            context_type=preset.context_type,
            metrics=metrics,
        )

    def _rerank(
        self, query: str, chunks: list[RetrievedChunk], preset: Preset, metrics: RetrievalMetrics
    ) -> list[RetrievedChunk]:
        if not preset.rerank_enabled or not chunks:
            return chunks
        try:
            reranker = self._reranker()
        except ModelLoadError as exc:
            metrics.degrade("rerank", str(exc))
            return chunks
        if reranker is None:
            return chunks  # reranking switched off by RAG_RERANK_MODEL=none: not a degradation
        started = time.perf_counter()
        scores = reranker.score(query, [_rerank_text(c) for c in chunks])
        metrics.rerank_time_ms = _ms(started)
        metrics.reranker = reranker.name
        rescored = [
            replace(
                c,
                scores=replace(c.scores, rerank=float(s)),
                relevance_score=_sigmoid(float(s)) if reranker.returns_logits else min(max(float(s), 0.0), 1.0),
            )
            for c, s in zip(chunks, scores, strict=True)
        ]
        return [rescored[i] for i in ranked_order(scores)]

    def _llm_rerank(self, query: str, chunks: list[RetrievedChunk], metrics: RetrievalMetrics) -> list[RetrievedChunk]:
        """NeuroLink's multi-factor rerank by the configured LLM; any LLM failure degrades the stage."""
        if not self.settings.llm_rerank or self._chat is None or not chunks:
            return chunks
        model = self._chat()
        if model is None:
            return chunks  # no LLM configured: no call
        from rag_service.retrieve.llm_rerank import llm_rerank

        started = time.perf_counter()
        try:
            ranked = llm_rerank(query, chunks, model, weights=self._llm_weights, top=self.settings.llm_rerank_top)
        except LLMError as exc:
            metrics.degrade("llm_rerank", str(exc))
            return chunks
        finally:
            metrics.llm_time_ms = _ms(started)
        metrics.reranker = model.name if metrics.reranker == NO_RERANKER else f"{metrics.reranker}+{model.name}"
        return ranked


def _rerank_text(chunk: RetrievedChunk) -> str:
    return f"{chunk.header_path}\n{chunk.content}" if chunk.header_path else chunk.content


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _merge(per_variant: Sequence[Sequence[SearchHit]], preset: Preset, collection: str) -> list[RetrievedChunk]:
    """One ranking from the variants' fused rankings (RRF across variants), identical texts once."""
    best_score = (
        max_linear_score(preset.vector_weight, preset.keyword_weight)
        if preset.fusion_method == "linear"
        else max_rrf_score(preset.vector_weight, preset.keyword_weight, preset.rrf_k)
    )
    hits: dict[int, SearchHit] = {}
    for variant_hits in per_variant:
        for hit in variant_hits:
            if hit.chunk_id not in hits or hit.fused_score > hits[hit.chunk_id].fused_score:
                hits[hit.chunk_id] = hit
    if len(per_variant) == 1:
        order = [h.chunk_id for h in per_variant[0]]
    else:
        merged = rrf_merge_lists([[h.chunk_id for h in hs] for hs in per_variant], rrf_k=preset.rrf_k)
        order = [chunk_id for chunk_id, _ in merged]
        asked = {h.chunk_id: h for h in per_variant[0]}  # the user's query: its context scores compare
        hits = {i: with_query_scores(hit, asked.get(i)) for i, hit in hits.items()}
    return dedupe([_to_chunk(hits[i], best_score, collection) for i in order])


def _to_chunk(hit: SearchHit, best_score: float, collection: str) -> RetrievedChunk:
    parent = None
    if hit.parent_content is not None and hit.parent_start is not None and hit.parent_end is not None:
        parent = (hit.parent_content, hit.parent_start, hit.parent_end)
    return from_fields(
        RetrievedChunk,
        hit,
        relevance_score=min(max(hit.fused_score / best_score, 0.0), 1.0) if best_score > 0 else 0.0,
        scores=ChunkScores(
            vector=hit.vector_score,
            keyword=hit.keyword_score,
            fused=hit.fused_score,
            context=hit.context_score,
            proximity=hit.proximity_score,
            context_similarity=hit.context_similarity,
        ),
        collection=collection,
        parent=parent,
    )

