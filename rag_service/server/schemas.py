"""Request and response bodies of the HTTP API (they are also its OpenAPI document)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the most ``RAG_API_MAX_QUERY_CHARS`` may allow (the schema's bound); the route enforces the configured
#: limit (default 2000), and the library cuts long queries further at a word boundary
MAX_QUERY_CHARS = 100_000
#: longest collection name (the library's own limit)
MAX_COLLECTION_CHARS = 200

#: PostgreSQL text cannot hold NUL: strings in query strings and paths are refused by this pattern
NO_NUL = r"^[^\x00]*$"

Collection = Field(default="default", min_length=1, max_length=MAX_COLLECTION_CHARS, description="collection name")


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


class _Strict(BaseModel):
    """Unknown fields, NaN/Infinity and NUL characters anywhere in the body are input errors (422)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: object) -> object:
        if _has_nul(data):
            raise ValueError("text must not contain NUL (\\x00) characters; remove them")
        return data


class PresetValues(_Strict):
    """Preset knobs; in a retrieve request they override the preset for this call only."""

    max_chunks: int | None = Field(default=None, ge=1, le=1000)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    diversity: float | None = Field(default=None, ge=0.0, le=1.0)
    expand_query: bool | None = None
    return_parents: bool | None = None
    vector_weight: float | None = Field(default=None, ge=0.0, le=1000.0)
    keyword_weight: float | None = Field(default=None, ge=0.0, le=1000.0)
    rerank_enabled: bool | None = None
    rrf_k: int | None = Field(default=None, ge=1, le=10_000)
    fusion_method: Literal["rrf", "linear"] | None = None
    candidate_k: int | None = Field(default=None, ge=1, le=1000)
    keyword_scorer: Literal["bm25", "ts_rank_cd"] | None = None
    show_metadata: bool | None = None
    graph_weight: float | None = Field(default=None, ge=0.0, le=1.0, description="graph walk's share; 0 = off")

    def given(self) -> dict[str, Any]:
        """Only the values that were set."""
        values = {name: getattr(self, name) for name in PresetValues.model_fields}
        return {name: value for name, value in values.items() if value is not None}


class RetrieveRequest(PresetValues):
    """``POST /api/rag/retrieve``: the query, its preset and any per-call override."""

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="the question or search text; at most RAG_API_MAX_QUERY_CHARS characters (default 2000)",
    )
    context: str = Field(default="chatbot", min_length=1, max_length=64, description="preset name")
    collection: str = Collection
    filters: dict[str, Any] | None = Field(
        default=None,
        description="source, source_prefix, headers, metadata, document_id, chunk_type, keywords",
    )
    return_formatted: bool = Field(default=True, description="include formatted_context (else null)")


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

    source: str = Field(min_length=1, max_length=1000, description="the document's key in its collection")
    text: str = Field(description="the document's full text")
    title: str = Field(default="", max_length=1000)


class DocumentsRequest(_Strict):
    """``POST /api/documents`` as JSON: texts to index into one collection."""

    collection: str = Collection
    documents: list[TextDocument] = Field(min_length=1)
    strategy: str = Field(default="recursive", min_length=1, max_length=64, description="chunking strategy")
    force: bool = Field(default=False, description="re-chunk and re-embed unchanged documents too")


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
