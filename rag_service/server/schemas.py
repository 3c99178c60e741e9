"""Request and response bodies of the HTTP API (they are also its OpenAPI document)."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rag_service import knobs
from rag_service.service_documents import MAX_SOURCE_CHARS

#: the most ``RAG_API_MAX_QUERY_CHARS`` may allow, and its default: the longest query the library reads (``knobs``);
#: the route enforces the configured limit
MAX_QUERY_CHARS = knobs.MAX_QUERY_CHARS
#: longest collection name (the library's own limit)
MAX_COLLECTION_CHARS = knobs.MAX_COLLECTION_CHARS
#: deepest nesting of objects and arrays in a request body (``filters.metadata`` gets most of it)
MAX_JSON_DEPTH = 16
#: most values (objects, arrays, strings, numbers) in one request body
MAX_JSON_VALUES = 20_000

#: PostgreSQL text cannot hold NUL: strings in query strings and paths are refused by this pattern
NO_NUL = r"^[^\x00]*$"

Collection = Field(default="default", min_length=1, max_length=MAX_COLLECTION_CHARS, description="collection name")


def json_problem(data: object) -> str | None:
    """One line naming the first field that nests too deeply, holds NUL or a non-finite number; else None.

    Iterative (a body nested 500 levels deep must not exhaust Python's stack) and bounded by
    ``MAX_JSON_VALUES``.
    """
    stack: list[tuple[object, tuple[str, ...]]] = [(data, () if isinstance(data, dict) else ("body",))]
    seen = 0
    while stack:
        value, path = stack.pop()
        seen += 1 + (len(value) if isinstance(value, dict | list) else 0)
        if seen > MAX_JSON_VALUES:
            return f"{_where(path)}: more than {MAX_JSON_VALUES} values in one request body; send fewer"
        if isinstance(value, str):
            if "\x00" in value:
                return f"{_where(path)}: text must not contain NUL (\\x00) characters; remove them"
            if not value.isascii() and _SURROGATE.search(value):
                return f"{_where(path)}: text holds a lone UTF-16 surrogate (\\ud800..\\udfff), not UTF-8; remove it"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{_where(path)}: {value} is not a finite number; send a finite one"
        elif isinstance(value, dict | list):
            if len(path) >= MAX_JSON_DEPTH:
                return f"{_where(path)}: nested deeper than {MAX_JSON_DEPTH} levels; send a flatter value"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and "\x00" in key:
                    return f"{_where(path)}: a key contains NUL (\\x00) characters; remove them"
                stack.append((item, (*path, str(key))))
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _where(path: tuple[str, ...]) -> str:
    """A field's dotted path, shortened to its first six parts."""
    shown = ".".join(part[:40] for part in path[:6])
    return (shown + (".…" if len(path) > 6 else "")) or "body"


class _Strict(BaseModel):
    """Unknown fields, NaN/Infinity, NUL characters and deep nesting anywhere in the body are input errors (422)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: object) -> object:
        problem = json_problem(data)
        if problem is not None:
            raise ValueError(problem)
        return data


def _knob(name: str) -> Any:
    """The field of one preset knob: optional, bounded as ``knobs.PRESET_KNOBS`` says."""
    return Field(default=None, **knobs.PRESET_KNOBS[name].field_bounds())


class PresetValues(_Strict):
    """Preset knobs (``rag_service.knobs``); in a retrieve request they override the preset for this call only."""

    max_chunks: int | None = _knob("max_chunks")
    max_tokens: int | None = _knob("max_tokens")
    diversity: float | None = _knob("diversity")
    expand_query: bool | None = _knob("expand_query")
    return_parents: bool | None = _knob("return_parents")
    vector_weight: float | None = _knob("vector_weight")
    keyword_weight: float | None = _knob("keyword_weight")
    rerank_enabled: bool | None = _knob("rerank_enabled")
    rrf_k: int | None = _knob("rrf_k")
    fusion_method: Literal["rrf", "linear"] | None = _knob("fusion_method")
    candidate_k: int | None = _knob("candidate_k")
    keyword_scorer: Literal["bm25", "ts_rank_cd"] | None = _knob("keyword_scorer")
    show_metadata: bool | None = _knob("show_metadata")
    graph_weight: float | None = _knob("graph_weight")
    min_relevance: float | None = _knob("min_relevance")

    def given(self) -> dict[str, Any]:
        """Only the values that were set."""
        values = {name: getattr(self, name) for name in PresetValues.model_fields}
        return {name: value for name, value in values.items() if value is not None}


class RetrieveRequest(PresetValues):
    """``POST /api/rag/retrieve``: the query, its preset and any per-call override (null: the preset's value)."""

    # the route refuses a query over RAG_API_MAX_QUERY_CHARS (at most MAX_QUERY_CHARS) with a message naming
    # that setting; a max_length here would answer a longer one with "at most 8000" whatever the setting says
    query: str = Field(
        min_length=1,
        json_schema_extra={"maxLength": MAX_QUERY_CHARS},
        description="the question or search text; at most RAG_API_MAX_QUERY_CHARS characters (default 8000); a long "
        "one is searched by its question (pasted tracebacks, logs and background left out, metrics.degraded says so)",
    )
    context: str = Field(
        default="chatbot", min_length=1, max_length=knobs.MAX_PRESET_NAME_CHARS, description="preset name"
    )
    collection: str = Collection
    filters: dict[str, Any] | None = Field(
        default=None,
        description="source, source_prefix, headers, metadata, document_id, chunk_type, keywords",
    )
    return_formatted: bool = Field(default=True, strict=True, description="include formatted_context (else null)")


class RetrieveResult(BaseModel):
    """The retrieved context; each chunk is ``RetrievedChunk.to_dict(summary=False)``.

    ``documents`` gives each document of the chunks once with its summary (``RAGResult.documents()``).
    """

    formatted_context: str | None
    chunks: list[dict[str, Any]]
    documents: list[dict[str, Any]] = []
    total_tokens: int
    sources: list[dict[str, Any]]
    query: str
    context_type: str


class RetrieveResponse(BaseModel):
    """``{success, result, metrics}`` of PRD 08 §5."""

    success: bool
    result: RetrieveResult
    metrics: dict[str, Any]


class TextDocument(_Strict):
    """One in-memory document to index."""

    source: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS, description="the document's key in its collection")
    text: str = Field(description="the document's full text")
    title: str = Field(default="", max_length=1000)


class DocumentsRequest(_Strict):
    """``POST /api/documents`` as JSON: texts to index into one collection."""

    collection: str = Collection
    documents: list[TextDocument] = Field(min_length=1)
    strategy: str = Field(
        default="auto",
        min_length=1,
        max_length=64,
        description="chunking strategy; auto (the default) picks one per document by its source's suffix",
    )
    force: bool = Field(
        default=False, strict=True, description="re-chunk unchanged documents too (unchanged chunks keep vectors)"
    )


class ReindexRequest(_Strict):
    """``POST /api/documents/reindex-all``: one collection, or every collection when omitted."""

    collection: str | None = Field(default=None, min_length=1, max_length=MAX_COLLECTION_CHARS)


class ErrorBody(BaseModel):
    """Code and one-line message of a failure."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """Every error: ``{success: false, error: {code, message}}``."""

    success: bool
    error: ErrorBody


class JobResponse(BaseModel):
    """A background job's state, counts and progress."""

    success: bool
    job: dict[str, Any]


class IngestResponse(BaseModel):
    """The ingest report of a ``POST /api/documents``."""

    success: bool
    report: dict[str, Any]


class DeleteResponse(BaseModel):
    """How many documents a ``DELETE /api/documents`` removed."""

    success: bool
    deleted: int


class CollectionOut(BaseModel):
    """A collection and its counts."""

    name: str
    documents: int
    chunks: int


class CollectionsResponse(BaseModel):
    """``GET /api/collections``."""

    success: bool
    collections: list[CollectionOut]


class PresetsResponse(BaseModel):
    """``GET /api/presets``: every preset row."""

    success: bool
    presets: list[dict[str, Any]]


class PresetResponse(BaseModel):
    """``PUT /api/presets/{context}``: the row after the edit."""

    success: bool
    preset: dict[str, Any]
