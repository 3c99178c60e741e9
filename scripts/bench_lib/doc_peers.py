"""Peer retrievers on one documentation set's chunks: LangChain and LlamaIndex as their users set them up.

Each peer gets the same chunks (``doc_chunks``) and the same precomputed all-MiniLM-L6-v2 vectors,
fed through an ``Embeddings`` / ``BaseEmbedding`` subclass that looks them up (no model runs here),
and stores them in its own database on our PostgreSQL server. A peer is a function
``query text -> [(file, start offset)]`` (best first), as many as it returns.

* ``pgvector``: langchain-postgres ``PGVector`` (cosine; no vector index, as shipped: exact search).
* ``ensemble_default`` / ``ensemble_lower``: LangChain ``EnsembleRetriever`` (RRF, weights 0.5/0.5)
  over the dense ``PGVector`` retriever and ``BM25Retriever`` (rank_bm25), whose tokeniser is its
  default (``str.split``) or lowercase word tokens (``\\w+``); ``bm25_lower`` is the latter alone.
* ``llamaindex_fusion``: LlamaIndex ``QueryFusionRetriever`` (``relative_score``, ``num_queries=1``,
  so no LLM) over ``PGVectorStore`` with ``hybrid_search=True``: its dense retriever and its text
  retriever (``ts_rank`` on a generated ``tsvector``, ``text_search_config="english"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from bench_lib.doc_chunks import DocChunk
from bench_lib.store import recreate_database
from rag_service.db.admin import database_url

Hit = tuple[str, int]
PeerFn = Callable[[str], list[Hit]]
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class PeerSpec:
    """A peer's stable key, its label in the table and the library family that builds it."""

    key: str
    label: str
    family: str


PEERS: tuple[PeerSpec, ...] = (
    PeerSpec("pgvector", "LangChain PGVector, dense", "langchain"),
    PeerSpec("ensemble_default", "LangChain EnsembleRetriever (dense + BM25Retriever, default tokens)", "langchain"),
    PeerSpec(
        "ensemble_lower", "LangChain EnsembleRetriever (dense + BM25Retriever, lowercase word tokens)", "langchain"
    ),
    PeerSpec("bm25_lower", "rank_bm25 BM25Okapi (LangChain BM25Retriever), lowercase word tokens", "langchain"),
    PeerSpec(
        "llamaindex_fusion",
        "LlamaIndex QueryFusionRetriever (dense + PGVectorStore ts_rank, relative score)",
        "llamaindex",
    ),
)


def lowercase_words(text: str) -> list[str]:
    """Lowercase word tokens (``\\w+``), the BM25 tokeniser of ``ensemble_lower``."""
    return _WORD.findall(text.lower())


class VectorLookup:
    """Precomputed vectors by text: chunk texts and query texts, one unit vector each."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray[Any, Any]) -> None:
        self._by_text = {text: row.tolist() for text, row in zip(texts, vectors, strict=True)}

    def __call__(self, text: str) -> list[float]:
        try:
            return self._by_text[text]
        except KeyError:
            raise KeyError(f"no precomputed vector for {text[:60]!r}; embed it before building the peers") from None


def langchain_peers(server_url: str, chunks: Sequence[DocChunk], lookup: VectorLookup, *, k: int) -> dict[str, PeerFn]:
    """PGVector (database ``rag_peers_langchain``, rebuilt), the two EnsembleRetrievers over it, BM25 alone."""
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_postgres import PGVector

    class PrecomputedEmbeddings(Embeddings):
        """Looks the vectors up; never runs a model."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [lookup(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return lookup(text)

    name = "rag_peers_langchain"
    recreate_database(server_url, name)
    engine = create_engine(database_url(server_url, name), pool_size=2, max_overflow=0)
    store = PGVector(
        PrecomputedEmbeddings(), connection=engine, embedding_length=384, collection_name="docs", use_jsonb=True
    )
    documents = [Document(page_content=c.text, metadata={"file": c.file, "start": c.start}) for c in chunks]
    batch = 1000
    for first in range(0, len(documents), batch):
        part = documents[first : first + batch]
        store.add_embeddings(
            texts=[d.page_content for d in part],
            embeddings=[lookup(d.page_content) for d in part],
            metadatas=[d.metadata for d in part],
            ids=[str(i) for i in range(first, first + len(part))],
        )
    dense = store.as_retriever(search_kwargs={"k": k})
    bm25_default = BM25Retriever.from_documents(documents, k=k)
    bm25_lower = BM25Retriever.from_documents(documents, k=k, preprocess_func=lowercase_words)
    ensemble_default = EnsembleRetriever(retrievers=[dense, bm25_default], weights=[0.5, 0.5])
    ensemble_lower = EnsembleRetriever(retrievers=[dense, bm25_lower], weights=[0.5, 0.5])

    def hits(docs: Sequence[Any]) -> list[Hit]:
        return [(d.metadata["file"], int(d.metadata["start"])) for d in docs]

    return {
        "pgvector": lambda q: hits(dense.invoke(q)),
        "ensemble_default": lambda q: hits(ensemble_default.invoke(q)),
        "ensemble_lower": lambda q: hits(ensemble_lower.invoke(q)),
        "bm25_lower": lambda q: hits(bm25_lower.invoke(q)),
    }


def llamaindex_peers(server_url: str, chunks: Sequence[DocChunk], lookup: VectorLookup, *, k: int) -> dict[str, PeerFn]:
    """QueryFusionRetriever (relative score) over PGVectorStore (database ``rag_peers_llamaindex``, rebuilt)."""
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.postgres import PGVectorStore

    class PrecomputedEmbedding(BaseEmbedding):
        """Looks the vectors up; never runs a model."""

        def _get_query_embedding(self, query: str) -> list[float]:
            return lookup(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return lookup(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return lookup(text)

    name = "rag_peers_llamaindex"
    recreate_database(server_url, name)
    url = database_url(server_url, name)  # psycopg 3 serves both engines (the unix socket of the embedded server)
    store = PGVectorStore(
        engine=create_engine(url, pool_size=2, max_overflow=0),
        async_engine=create_async_engine(url, pool_size=2, max_overflow=0),
        table_name="docs",
        embed_dim=384,
        hybrid_search=True,
        text_search_config="english",
    )
    embed_model = PrecomputedEmbedding(model_name="all-MiniLM-L6-v2 (precomputed)")
    nodes = [
        TextNode(text=c.text, id_=str(i), metadata={"file": c.file, "start": c.start}, embedding=lookup(c.text))
        for i, c in enumerate(chunks)
    ]
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
        show_progress=False,
    )
    dense = index.as_retriever(vector_store_query_mode="default", similarity_top_k=k)
    text = index.as_retriever(vector_store_query_mode="sparse", similarity_top_k=k, sparse_top_k=k)
    fusion = QueryFusionRetriever(
        [dense, text],
        llm=MockLLM(),
        mode=FUSION_MODES.RELATIVE_SCORE,
        similarity_top_k=k,
        num_queries=1,
        use_async=False,
    )

    def hits(nodes_with_scores: Sequence[Any]) -> list[Hit]:
        return [(n.node.metadata["file"], int(n.node.metadata["start"])) for n in nodes_with_scores]

    return {"llamaindex_fusion": lambda q: hits(fusion.retrieve(q))}
