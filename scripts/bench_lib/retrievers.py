"""The timed retrievers: ours (each arm, hybrid SQL, ``retrieve()``) and the baselines on the same data.

Every retriever is a function ``query index -> chunk ids (1-based, best first)``, so one loop can
time them all, interleaved, and compare what they return. Baselines:

* ``numpy_exact``: exact cosine over all vectors in memory (the limit a vector index approximates);
* ``bm25s``: in-memory BM25 (bm25s), with the simple tokeniser of ``corpus.simple_tokens``;
* LangChain's ``EnsembleRetriever`` (weights 0.5/0.5, RRF c=60) over ``BM25Retriever`` (rank_bm25,
  same tokeniser) and langchain-postgres ``PGVector`` on the same server, in its own database, fed
  the same precomputed vectors through an ``Embeddings`` that looks them up: no model time anywhere.
  PGVector creates no vector index; it is timed as it comes (exact scan, index scans off for its
  sessions) and with an HNSW index like ours (same m, ef_construction and ef_search).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from sqlalchemy import Engine, create_engine, event, text
from tqdm import tqdm

from bench_lib.corpus import Corpus, Matrix, QuerySet, simple_tokens
from bench_lib.store import COLLECTION, database_comment, recreate_database, shorten_vectors
from bench_lib.store import set_database_comment as mark_database
from rag_service.config import Preset, Settings
from rag_service.db.admin import database_url
from rag_service.db.database import Database
from rag_service.db.packed_postings import is_packed
from rag_service.db.parallel_search import fused_search
from rag_service.db.search import SearchRequest
from rag_service.db.search_request import ef_search_for
from rag_service.retrieve.context import context_applies
from rag_service.retrieve.query import bm25_text, excluded_terms, parse_query, websearch_parts
from rag_service.service import UniversalRAGService

TOP_K = 20
RetrieverFn = Callable[[int], list[int]]


@dataclass(frozen=True, slots=True)
class Spec:
    """A retriever's stable key, its label in reports and its family (for plot styling)."""

    key: str
    label: str
    family: str


SPECS: tuple[Spec, ...] = (
    Spec("ours_vector", "ours: vector arm (HNSW)", "ours"),
    Spec("ours_fulltext", "ours: keyword arm, BM25 (default scorer)", "ours"),
    Spec("ours_fulltext_frequent", "ours: keyword arm, BM25, top-20 frequent terms only", "ours"),
    Spec("ours_fulltext_tsrank", "ours: keyword arm, ts_rank_cd scorer", "ours"),
    Spec("ours_fulltext_tsrank_frequent", "ours: keyword arm, ts_rank_cd, top-20 frequent terms only", "ours"),
    Spec("ours_hybrid", "ours: hybrid SQL (one statement, the preset's fusion)", "ours"),
    Spec("ours_hybrid_rrf", "ours: hybrid SQL with RRF fusion", "ours"),
    Spec("ours_retrieve", "ours: retrieve() incl. MiniLM query embedding, no rerank", "ours"),
    Spec("numpy_exact", "numpy exact cosine (in memory)", "baseline"),
    Spec("bm25s", "bm25s BM25 (in memory)", "baseline"),
    Spec("langchain_bm25", "LangChain BM25Retriever alone", "langchain"),
    Spec("langchain_ensemble", "LangChain EnsembleRetriever (PGVector as shipped: no vector index)", "langchain"),
    Spec("langchain_ensemble_hnsw", "LangChain EnsembleRetriever (PGVector + HNSW index)", "langchain"),
)
SPEC_BY_KEY = {s.key: s for s in SPECS}


@dataclass(frozen=True, slots=True)
class QueryParts:
    """What ``Retriever`` derives from a query's text for the keyword arm."""

    any_terms: str
    required_terms: str
    bm25_text: str
    excluded_terms: str = ""

    @classmethod
    def of(cls, text: str) -> QueryParts:
        """Parsed the way ``Retriever.search_candidates`` parses a query variant."""
        parsed = parse_query(text)
        any_terms, required = websearch_parts(parsed)
        return cls(any_terms, required, bm25_text(parsed), excluded_terms(parsed))


@dataclass(slots=True)
class Workload:
    """The queries of one corpus size: typical ones and ones made only of the most frequent terms."""

    queries: QuerySet
    frequent: QuerySet
    parts: list[QueryParts] = field(default_factory=list)
    frequent_parts: list[QueryParts] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.parts = [QueryParts.of(t) for t in self.queries.texts]
        self.frequent_parts = [QueryParts.of(t) for t in self.frequent.texts]


def search_request(
    settings: Settings,
    preset: Preset,
    vector: Matrix | None,
    parts: QueryParts,
    *,
    vector_weight: float | None = None,
    keyword_weight: float | None = None,
    keyword_scorer: str | None = None,
    fusion_method: str | None = None,
    collection_chunks: int = 0,
    packed_postings: bool = False,
) -> SearchRequest:
    """The request ``Retriever`` builds for one query variant under ``preset`` (weights, scorer, fusion overridable)
    on a collection of ``collection_chunks`` chunks (its ``hnsw.ef_search`` grows with the size, and from
    ``settings.parallel_arms_from`` its arms run at once), with ``packed_postings`` when the collection has them
    (``db.packed_postings``)."""
    vector_weight = preset.vector_weight if vector_weight is None else vector_weight
    return SearchRequest(
        collection=COLLECTION,
        query_vector=vector,
        any_terms=parts.any_terms,
        required_terms=parts.required_terms,
        excluded_terms=parts.excluded_terms,
        vector_weight=vector_weight,
        keyword_weight=preset.keyword_weight if keyword_weight is None else keyword_weight,
        rrf_k=preset.rrf_k,
        fusion_method=preset.fusion_method if fusion_method is None else fusion_method,
        candidate_k=preset.candidate_k,
        limit=preset.candidate_k,
        fts_config=settings.fts_config,
        ef_search=ef_search_for(collection_chunks, base=settings.hnsw_ef_search, depth=preset.candidate_k),
        keyword_scorer=preset.keyword_scorer if keyword_scorer is None else keyword_scorer,
        bm25_text=parts.bm25_text,
        bm25_k1=settings.bm25_k1,
        bm25_b=settings.bm25_b,
        bm25_max_postings=settings.bm25_max_postings,
        packed_postings=packed_postings,
        parallel_arms=0 < settings.parallel_arms_from <= collection_chunks,
        context_bm25=context_applies(settings.context_weight, vector_weight),
        proximity=context_applies(settings.proximity_weight, vector_weight),
        context_vector=context_applies(settings.context_vector_weight, vector_weight),
    )


def vector_request(
    settings: Settings, preset: Preset, work: Workload, i: int, *, collection_chunks: int
) -> SearchRequest:
    """The request of query ``i`` of ``work`` to the vector arm alone (keyword weight 0), as ``search_request``."""
    return search_request(
        settings,
        preset,
        work.queries.vectors[i],
        work.parts[i],
        vector_weight=1.0,
        keyword_weight=0.0,
        collection_chunks=collection_chunks,
    )


def ours(
    database: Database,
    settings: Settings,
    preset: Preset,
    work: Workload,
    service: UniversalRAGService,
    stages: list[dict[str, float]],
    *,
    collection_chunks: int = 0,
    packed: bool | None = None,
) -> dict[str, RetrieverFn]:
    """Our arms through ``hybrid_search`` (one transaction each, as ``Retriever`` runs them) and ``retrieve()``.

    ``preset`` is the stored ``workflow`` row, so the hybrid statement is exactly the one ``retrieve()``
    sends (``hnsw.ef_search`` from ``collection_chunks``, as the service picks it); every ``retrieve()``
    call appends its stage timings (``metrics``) to ``stages``. ``packed``: whether the keyword arm uses the
    collection's packed postings (default: when it has them, as the service decides).
    """
    size = collection_chunks
    # the collection's packed postings, as read_call_preset tells the service's Retriever
    if packed is None:
        packed = database.read(lambda s: is_packed(s, COLLECTION))
    request = partial(search_request, packed_postings=packed)

    def run(request: SearchRequest) -> list[int]:  # as the Retriever runs it: the arms at once where it may
        with database.transaction() as session:
            return [hit.chunk_id for hit in fused_search(session, request)]

    q = work.queries

    def keyword(parts: QueryParts, scorer: str) -> list[int]:
        return run(request(settings, preset, None, parts, vector_weight=0.0, keyword_weight=1.0, keyword_scorer=scorer))

    return {
        "ours_vector": lambda i: run(vector_request(settings, preset, work, i, collection_chunks=size)),
        "ours_fulltext": lambda i: keyword(work.parts[i], "bm25"),
        "ours_fulltext_frequent": lambda i: keyword(work.frequent_parts[i], "bm25"),
        "ours_fulltext_tsrank": lambda i: keyword(work.parts[i], "ts_rank_cd"),
        "ours_fulltext_tsrank_frequent": lambda i: keyword(work.frequent_parts[i], "ts_rank_cd"),
        "ours_hybrid": lambda i: run(request(settings, preset, q.vectors[i], work.parts[i], collection_chunks=size)),
        "ours_hybrid_rrf": lambda i: run(
            request(settings, preset, q.vectors[i], work.parts[i], fusion_method="rrf", collection_chunks=size)
        ),
        "ours_retrieve": retrieve_fn(service, preset, work, stages),
    }


def retrieve_fn(
    service: UniversalRAGService, preset: Preset, work: Workload, stages: list[dict[str, float]]
) -> RetrieverFn:
    """``service.retrieve()`` of query ``i`` without rerank; each call appends its stage timings to ``stages``."""
    q = work.queries

    def retrieve(i: int) -> list[int]:
        result = service.retrieve(
            q.texts[i], preset.context_type, collection=COLLECTION, rerank_enabled=False, expand_query=False
        )
        m = result.metrics
        stages.append(
            {
                "embedding": m.embedding_time_ms,
                "sql": m.retrieval_time_ms,
                "parents": m.parents_time_ms,
                "mmr": m.mmr_time_ms,
                "format": m.format_time_ms,
                "total": m.total_time_ms,
            }
        )
        return [c.chunk_id for c in result.chunks]

    return retrieve


def numpy_exact(corpus: Corpus, work: Workload) -> RetrieverFn:
    """Exact cosine top-20 over the whole (unit-length) matrix."""
    matrix = corpus.vectors

    def search(i: int) -> list[int]:
        scores = matrix @ work.queries.vectors[i]
        top = np.argpartition(-scores, TOP_K)[:TOP_K]
        return [int(j) + 1 for j in top[np.argsort(-scores[top], kind="stable")]]

    return search


def bm25s_retriever(corpus: Corpus, work: Workload, stop_words: frozenset[str]) -> RetrieverFn:
    """bm25s (Lucene BM25, k1 1.5, b 0.75) over the simple tokens."""
    import bm25s

    index = bm25s.BM25()
    index.index([simple_tokens(t, stop_words) for t in corpus.texts], show_progress=False)
    tokens = [simple_tokens(t, stop_words) for t in work.queries.texts]

    def search(i: int) -> list[int]:
        ids, _ = index.retrieve([tokens[i]], k=TOP_K, show_progress=False, n_threads=0)
        return [int(j) + 1 for j in np.asarray(ids[0])]

    return search


def english_stop_words() -> frozenset[str]:
    """The English stop words bm25s ships (used by both BM25 baselines)."""
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


# -- LangChain ---------------------------------------------------------------------------------------


def _engine(url: str, settings: dict[str, str]) -> Engine:
    engine = create_engine(url, pool_size=2, max_overflow=0, pool_pre_ping=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        with dbapi_connection.cursor() as cursor:
            for name, value in settings.items():
                cursor.execute("SELECT set_config(%s, %s, false)", (name, value))
        dbapi_connection.commit()

    return engine


def _precomputed_embeddings(work: Workload) -> Any:
    from langchain_core.embeddings import Embeddings

    lookup: dict[str, list[float]] = dict(zip(work.queries.texts, work.queries.vectors.tolist(), strict=True))

    class PrecomputedEmbeddings(Embeddings):
        """Returns the benchmark's vectors for the benchmark's query texts; never runs a model."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [lookup[t] for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return lookup[text]

    return PrecomputedEmbeddings()


@dataclass(slots=True)
class LangChainSide:
    """The LangChain retrievers of one size and what it took to build them."""

    retrievers: dict[str, RetrieverFn]
    build: dict[str, Any]
    plans: dict[str, str]
    engines: list[Engine]

    def close(self) -> None:
        """Dispose the engines."""
        for engine in self.engines:
            engine.dispose()


def langchain_side(
    server_url: str, name: str, corpus: Corpus, work: Workload, stop_words: frozenset[str], *, rebuild: bool
) -> LangChainSide:
    """BM25Retriever, PGVector (database ``name``, loaded once and reused) and the two ensembles."""
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_postgres import PGVector

    build: dict[str, Any] = {}
    url = database_url(server_url, name)
    marker = f"langchain bench corpus {corpus.fingerprint}"
    embeddings = _precomputed_embeddings(work)
    loaded = not rebuild and database_comment(server_url, name) == marker
    build["reused"] = loaded
    if not loaded:
        recreate_database(server_url, name)
        engine = _engine(url, {"maintenance_work_mem": "1GB"})
        store = PGVector(
            embeddings,
            connection=engine,
            embedding_length=corpus.vectors.shape[1],
            collection_name=COLLECTION,
            use_jsonb=True,
        )
        started = time.perf_counter()
        batch = 1000
        for start in tqdm(range(0, corpus.size, batch), desc="PGVector add_embeddings", unit="batch"):
            stop = min(start + batch, corpus.size)
            store.add_embeddings(
                texts=corpus.texts[start:stop],
                embeddings=corpus.vectors[start:stop].tolist(),
                ids=[str(i + 1) for i in range(start, stop)],
            )
        build["add_embeddings_s"] = time.perf_counter() - started
        print("building an HNSW index on langchain_pg_embedding ...", flush=True)
        started = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(
                text(
                    "CREATE INDEX langchain_pg_embedding_hnsw ON langchain_pg_embedding "
                    "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 128)"
                )
            )
        build["hnsw_build_s"] = time.perf_counter() - started
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE langchain_pg_embedding"))
        engine.dispose()
        mark_database(server_url, name, marker)

    exact_engine = _engine(url, {"enable_indexscan": "off"})  # what PGVector does without a vector index
    hnsw_engine = _engine(url, {"hnsw.ef_search": "100"})
    exact = PGVector(
        embeddings,
        connection=exact_engine,
        embedding_length=corpus.vectors.shape[1],
        collection_name=COLLECTION,
        use_jsonb=True,
    )
    hnsw = PGVector(
        embeddings,
        connection=hnsw_engine,
        embedding_length=corpus.vectors.shape[1],
        collection_name=COLLECTION,
        use_jsonb=True,
    )

    started = time.perf_counter()
    bm25 = BM25Retriever.from_texts(
        corpus.texts,
        ids=[str(i + 1) for i in range(corpus.size)],
        preprocess_func=lambda t: simple_tokens(t, stop_words),
        k=TOP_K,
    )
    build["bm25retriever_build_s"] = time.perf_counter() - started
    ensemble = EnsembleRetriever(retrievers=[bm25, exact.as_retriever(search_kwargs={"k": TOP_K})], weights=[0.5, 0.5])
    ensemble_hnsw = EnsembleRetriever(
        retrievers=[bm25, hnsw.as_retriever(search_kwargs={"k": TOP_K})], weights=[0.5, 0.5]
    )
    texts = work.queries.texts

    def ids(docs: Sequence[Any]) -> list[int]:
        return [int(d.id) for d in docs]

    plans = {
        "pgvector_as_shipped": _pgvector_plan(exact_engine, exact, work.queries.vectors[0]),
        "pgvector_hnsw": _pgvector_plan(hnsw_engine, hnsw, work.queries.vectors[0]),
    }
    return LangChainSide(
        retrievers={
            "langchain_bm25": lambda i: ids(bm25.invoke(texts[i])),
            "langchain_ensemble": lambda i: ids(ensemble.invoke(texts[i])),
            "langchain_ensemble_hnsw": lambda i: ids(ensemble_hnsw.invoke(texts[i])),
        },
        build=build,
        plans=plans,
        engines=[exact_engine, hnsw_engine],
    )


def _pgvector_plan(engine: Engine, store: Any, vector: Matrix) -> str:
    """EXPLAIN of the very statement PGVector runs for a similarity search (captured from the engine)."""
    captured: list[tuple[str, Any]] = []

    def capture(_conn, _cursor, statement, parameters, _context, _executemany):  # type: ignore[no-untyped-def]
        if "ORDER BY distance" in statement:
            captured.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        store.similarity_search_by_vector(vector.tolist(), k=TOP_K)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    if not captured:
        return "(PGVector's search statement was not captured)"
    statement, parameters = captured[-1]
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN " + statement, parameters).all()
    return shorten_vectors("\n".join(r[0] for r in rows))
