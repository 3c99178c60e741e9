"""``UniversalRAGService`` wires the parts together; it holds no SQL and no model code.

``get_universal_rag()`` returns the one service of the process (built on first call, thread-safe);
``reset_universal_rag()`` closes it, for tests and for code that changes the environment.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_service.config import Preset, Settings, load_settings
from rag_service.db.collections import CollectionInfo, list_collections, require_collection
from rag_service.db.database import Database
from rag_service.db.index_settings import check_index_settings, check_stored_model_read
from rag_service.db.presets import CallPreset, list_presets, read_call_preset
from rag_service.db.replicas import ReadRouter
from rag_service.embed import Embedder, embedder_for, stop_model_exports
from rag_service.errors import ConfigurationError, first_line
from rag_service.forks import ChildLock, after_fork_in_child
from rag_service.pools import LazyThreadPool
from rag_service.service_documents import DocumentOperations
from rag_service.tokens import own_encoding

if TYPE_CHECKING:  # the retrieval stack (numpy, tiktoken, rerankers) loads on the first retrieve, not for indexing
    from sqlalchemy.orm import Session  # and the ingest stack on the first indexing, not for a query

    from rag_service.db.health import DatabaseHealth
    from rag_service.ingest.backfill import BackfillReport
    from rag_service.ingest.graph import GraphReport
    from rag_service.ingest.indexer import Indexer
    from rag_service.ingest.progress import ProgressListener
    from rag_service.ingest.report import IngestReport
    from rag_service.llm import ChatModel, OpenAICompatibleChat
    from rag_service.result import RAGResult, RetrievalMetrics, RetrievedChunk
    from rag_service.retrieve.rerank import Reranker, RerankerCache
    from rag_service.retrieve.retriever import RetrievalOptions, Retriever, SetupReader

_NOT_GIVEN: Any = object()


class UniversalRAGService(DocumentOperations):
    """Index and retrieve LLM-ready context: the one way in for every operation (documents: ``DocumentOperations``)."""

    def __init__(
        self,
        settings: Settings,
        *,
        database: Database,
        embedder: Embedder | None = None,
        reranker: Reranker | None = _NOT_GIVEN,
        reads: ReadRouter | None = None,
        check_model: bool = True,
    ) -> None:
        """``check_model=False`` skips the check that the stored vectors are of the embedder's model (the
        ``rag reindex --all`` that may switch them); every read and write still checks it."""
        self.settings = settings
        self.db = database
        self.reads = reads or ReadRouter(database)
        self._embedder = embedder or embedder_for(
            settings.embedding_model,
            batch_size=settings.embedding_batch_size,
            backend=settings.embedding_backend,
            cache_dir=settings.data_dir / "models",
        )
        self._rerankers: RerankerCache | None = None
        self._fixed_reranker = reranker
        self._aretrieve_pool = LazyThreadPool(settings.pool_size, "rag-aretrieve", initializer=own_encoding)
        self._chat: OpenAICompatibleChat | None = None
        if check_model:
            self._check_embedding_record()
        self._retriever_instance: Retriever | None = None
        self._new_locks()
        after_fork_in_child(self._new_locks)  # and new connections and pools: the parts' own (``forks``)

    def _new_locks(self) -> None:
        self._chat_lock, self._parts_lock = threading.Lock(), threading.RLock()  # a forked child's: never held

    # -- parts, built lazily -------------------------------------------------------------------------

    def embedder(self) -> Embedder:
        """The embedder; the bundled model is loaded on its first use (see ``embed.embedder_for``)."""
        return self._embedder

    def warm_up(self, context: str = "workflow") -> str | None:
        """Load the embedding model, read the HNSW graphs into shared_buffers (``db/prewarm.py``) and run one
        retrieval with ``context`` (``rag serve`` before ready, ``rag mcp`` at start), here and on
        ``aretrieve``'s pool, so the first query pays neither the model, the reranker, the first
        connections, a cold graph nor a pool thread's first use. Returns why it failed,
        or None; not raised: the calls that follow report their own problems."""
        from rag_service.db.prewarm import prewarm_search_servers

        try:
            self._embedder.embed_query("warm up")  # the model's own error, before retrieval's degraded note
            prewarm_search_servers(self.reads)  # the HNSW graphs, so the first searches read no disk
            # a stored collection: searching an unknown one stops before the retrieval stack has loaded
            collection = next((info.name for info in self.collections()), "default")
            options = replace(self._options(collection, None), ask_llm=False)  # no LLM call nobody asked for
            setup = self._setup_reader(context, {}, collection=collection)
            warm = functools.partial(self._retriever().retrieve, "warm up", setup, options)
            warm(route=self.reads.route())
            self._retrieve_executor().submit(lambda: warm(route=self.reads.route())).result()
        except Exception as exc:  # a model or database problem: the first real call reports it again
            return first_line(exc)
        return None

    def stop_warm_up(self) -> None:
        """End an unfinished first export of the embedding model (a child process): a stop need not wait."""
        stop_model_exports()

    def reranker(self) -> Reranker | None:
        """The reranker of ``RAG_RERANK_MODEL`` (None when 'none'); ModelLoadError when it cannot load."""
        if self._fixed_reranker is not _NOT_GIVEN:
            fixed: Reranker | None = self._fixed_reranker
            return fixed
        with self._parts_lock:
            if self._rerankers is None:
                from rag_service.retrieve.rerank import RerankerCache

                self._rerankers = RerankerCache()
            rerankers = self._rerankers
        return rerankers.get(self.settings.rerank_model, cache_dir=self.settings.data_dir / "models")

    def _retriever(self) -> Retriever:
        with self._parts_lock:
            if self._retriever_instance is None:
                from rag_service.retrieve.retriever import Retriever

                self._retriever_instance = Retriever(
                    self.db, self.embedder, self.reranker, self.settings, reads=self.reads, chat=self.chat_model
                )
            return self._retriever_instance

    def _options(self, collection: str, filters: Mapping[str, Any] | None) -> RetrievalOptions:
        """The call's options, validated: collection name and filters (their existence is checked with the preset)."""
        from rag_service.db.search import ChunkFilters
        from rag_service.retrieve.retriever import RetrievalOptions

        return RetrievalOptions(collection=self.collection_name(collection), filters=ChunkFilters.parse(filters))

    def chat_model(self) -> ChatModel | None:
        """The LLM of ``RAG_LLM_BASE_URL`` (built on first use), or None when none is configured."""
        if not self.settings.llm_configured:
            return None
        with self._chat_lock:
            if self._chat is None:
                from rag_service.llm import chat_model_for

                self._chat = chat_model_for(self.settings)
            return self._chat

    def _check_embedding_record(self) -> None:
        with self.db.transaction() as session:
            check_index_settings(
                session, model_id=self._embedder.model_id, dim=self._embedder.dim, fts_config=self.settings.fts_config
            )

    # -- ingestion -----------------------------------------------------------------------------------

    def _indexer(self) -> Indexer:
        from rag_service.ingest.indexer import Indexer

        return Indexer(self.db, self.embedder(), self.settings, chat=self.chat_model())

    def index_paths(
        self,
        paths: Sequence[str | Path],
        *,
        collection: str = "default",
        strategy: str | None = None,
        prune: bool = False,
        force: bool = False,
        progress: bool = False,
        metadata: dict[str, Any] | None = None,
        root: str | Path | None = None,
    ) -> IngestReport:
        """Index files and folders into ``collection`` (incremental; see ``Indexer.index_paths``).

        Files are keyed by their path relative to ``root``, else to their checkout (``.git``), else absolute.
        """
        return self._indexer().index_paths(
            paths,
            collection=self.collection_name(collection),
            strategy=strategy,
            prune=prune,
            force=force,
            progress=progress,
            metadata=metadata,
            root=root,
        )

    def index_texts(
        self,
        items: Iterable[tuple[str, str, str]],
        *,
        collection: str,
        strategy: str = "recursive",
        force: bool = False,
        progress: bool = False,
        total: int | None = None,
        metadata: dict[str, Any] | None = None,
        listener: ProgressListener | None = None,
    ) -> IngestReport:
        """Index in-memory documents given as ``(source, title, text)``; ``metadata`` as in ``index_paths``;
        ``listener(done, total)`` hears the progress (``total`` as given)."""
        return self._indexer().index_texts(
            items,
            collection=self.collection_name(collection),
            strategy=strategy,
            force=force,
            progress=progress,
            total=total,
            metadata=metadata,
            listener=listener,
        )

    def reindex_all(
        self,
        *,
        collection: str | None = None,
        progress: bool = False,
        listener: ProgressListener | None = None,
        switch_model: bool = False,
    ) -> IngestReport:
        """Re-chunk and re-embed every stored document from its stored text; ``listener(done, total)``.

        ``switch_model`` (``rag reindex --all``): switch every collection to this service's embedding
        model where the stored vectors are of another one, of any dimension up to HNSW's 2,000 (README, "Switching
        the embedding model"); without it such a database is refused. UnknownCollectionError when
        ``collection`` holds no document (nothing to re-chunk: likely a typo).
        """
        if collection is not None:
            collection = self.require_collection(collection)
        return self._indexer().reindex_all(
            collection=collection, progress=progress, listener=listener, switch_model=switch_model
        )

    def build_metadata(self, *, collection: str | None = None) -> BackfillReport:
        """Recompute document summaries and chunk keywords of stored documents (no re-embedding)."""
        from rag_service.ingest.backfill import build_metadata

        if collection is not None:
            collection = self.require_collection(collection)
        return build_metadata(self.db, self.settings, self._indexer().summary_writer(), collection=collection)

    def build_graph(self, *, collection: str | None = None) -> GraphReport:
        """Rebuild the chunk graph of ``collection`` (or of every collection) from stored chunks; no embedding."""
        if collection is not None:
            collection = self.require_collection(collection)
        return self._indexer().build_graph(collection=collection)

    # -- retrieval -----------------------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        context: str = "chatbot",
        *,
        collection: str = "default",
        filters: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> RAGResult:
        """Context for ``query`` shaped by the ``context`` preset; keyword overrides apply to this call."""
        from rag_service.retrieve.query import validate_query

        validate_query(query)  # an empty query is its own error, before the collection's
        options = self._options(collection, filters)
        read_setup = self._setup_reader(context, overrides, collection=options.collection)
        return self._retriever().retrieve(query, read_setup, options, route=self.reads.route())

    async def aretrieve(
        self,
        query: str,
        context: str = "chatbot",
        *,
        collection: str = "default",
        filters: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> RAGResult:
        """``retrieve`` for asyncio callers: runs in a bounded thread pool, never on the event loop.

        The pool has ``RAG_POOL_SIZE`` threads, so concurrent calls queue for a thread rather than
        for a database connection.
        """
        call = functools.partial(self.retrieve, query, context, collection=collection, filters=filters, **overrides)
        return await asyncio.get_running_loop().run_in_executor(self._retrieve_executor(), call)

    def _retrieve_executor(self) -> ThreadPoolExecutor:
        return self._aretrieve_pool.get()

    def ranked_candidates(
        self,
        query: str,
        context: str = "search",
        *,
        collection: str = "default",
        filters: Mapping[str, Any] | None = None,
        **overrides: Any,
    ) -> tuple[list[RetrievedChunk], RetrievalMetrics]:
        """Fused (and reranked) candidates with their metrics, before parents, MMR and formatting.

        For evaluation and inspection: ``candidate_k`` sets the depth of each arm.
        """
        from rag_service.retrieve.query import validate_query

        validate_query(query)  # an empty query is its own error, before the collection's
        options = self._options(collection, filters)
        read_setup = self._setup_reader(context, overrides, collection=options.collection)
        return self._retriever().ranked_candidates(query, read_setup, options, route=self.reads.route())

    def preset(self, context: str, **overrides: Any) -> Preset:
        """The ``context`` preset with ``overrides`` applied, validated as ``retrieve()`` would (raises the same).

        A catalog read, as ``presets()``: from the primary, so it shows an ``update_preset`` at once.
        """
        return self.db.read(self._setup_reader(context, overrides)).preset

    def _setup_reader(
        self, context: str, overrides: Mapping[str, Any], *, collection: str | None = None
    ) -> SetupReader:
        """Reads the preset (and the collection's size), in one statement with the check that ``collection``
        exists (when given); ``retrieve()`` runs it in its search transaction. The check is not cached: a collection
        created or emptied by another process is seen at once; it costs one primary-key probe in a read the call
        makes anyway (docs/benchmarks.md, issue 23)."""

        def read(session: Session) -> CallPreset:
            found = read_call_preset(session, context, collection=collection, overridden=overrides)  # one statement
            preset = found.preset.with_overrides(dict(overrides)) if overrides else found.preset  # a bad knob first
            if collection is not None:
                if not found.collection_exists:
                    require_collection(session, collection)  # its error names the collections there are
                # another process may have switched the stored model (or be switching it) since this one started
                model_id, fts = self._embedder.model_id, self.settings.fts_config
                check_stored_model_read(session, found.stored_model, model_id=model_id, fts_config=fts)
            return found._replace(preset=preset)

        return read

    def presets(self) -> list[Preset]:
        """Every stored preset (the rows of ``rag_configurations``), read from the primary as ``preset()`` is."""
        return self.db.read(list_presets)

    def contexts(self) -> list[str]:
        """The preset names stored in ``rag_configurations``."""
        return [preset.context_type for preset in self.presets()]

    def update_preset(self, context: str, **values: Any) -> Preset:
        """Change some knobs of the stored ``context`` preset, validated as overrides are; returns the new preset.

        Every later call (of any process) follows it. UnknownContextError for a missing preset.
        """
        if not values:
            name = context[:64]
            raise ConfigurationError(f"no values to change for preset {name!r}; give one, e.g. max_chunks=6")
        from rag_service.db.catalog import update_preset

        with self.db.transaction() as session:
            return update_preset(session, context, values)

    def require_collection(self, collection: str) -> str:
        """``collection`` as stored (``collection_name``); ``UnknownCollectionError`` naming the existing collections
        unless it holds documents. Every read of one collection goes through this check; indexing creates one."""
        name = self.collection_name(collection)
        self.db.read(lambda session: require_collection(session, name))
        return name

    def collections(self) -> list[CollectionInfo]:
        """Every collection that holds documents, with its document and chunk counts."""
        return self.db.read(list_collections)

    def database_health(self) -> DatabaseHealth:
        """The primary's pool use and circuit state, read without a round trip (for metrics)."""
        from rag_service.db.health import database_health

        return database_health(self.db)

    def readiness_problem(self) -> str | None:
        """Why the database cannot serve now (one line: circuit open, unreachable, schema behind), or None."""
        from rag_service.db.health import readiness_problem

        return readiness_problem(self.db)

    def close(self) -> None:
        """End a model export; release the ``aretrieve`` threads (after their calls finish) and the connections."""
        self.stop_warm_up()
        self._aretrieve_pool.shutdown()
        self.reads.dispose()
        if self._chat is not None:
            self._chat.close()
        self.db.dispose()


def build_service(
    settings: Settings | None = None, *, embedder: Embedder | None = None, check_model: bool = True
) -> UniversalRAGService:
    """A service from the environment: embedded database migrated on demand, external one checked.

    ``embedder``: one made (and maybe loading) already; by default the one ``settings`` selects.
    ``check_model``: as ``UniversalRAGService``'s (False for ``rag reindex --all``).
    Logging, the environment and OpenMP are the caller's: the ``rag`` command sets them for its process.
    """
    from rag_service.db import migrate
    from rag_service.db.engine import open_engine
    from rag_service.db.replicas import open_read_router
    from rag_service.db.status import require_current_schema, schema_is_current

    settings = settings or load_settings()
    engine = open_engine(settings)
    if settings.database_url is None and not schema_is_current(engine):
        migrate.upgrade(engine)  # our own embedded database: keep it at head
    require_current_schema(engine)
    database = Database(engine)
    return UniversalRAGService(
        settings,
        database=database,
        embedder=embedder,
        reads=open_read_router(database, settings),
        check_model=check_model,
    )


_instance: UniversalRAGService | None = None
_instance_lock = ChildLock()


def get_universal_rag() -> UniversalRAGService:
    """The process-wide service, built from the environment on first call (thread-safe); a forked child gets the
    same object, on connections and threads of its own (``rag_service.forks``)."""
    global _instance
    if _instance is None:
        with _instance_lock:
            if _instance is None:
                _instance = build_service()
    return _instance


def reset_universal_rag() -> None:
    """Close and forget the process-wide service; the next ``get_universal_rag()`` builds a new one."""
    global _instance
    with _instance_lock:
        if _instance is not None:
            _instance.close()
        _instance = None
