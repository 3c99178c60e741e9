"""The ``/api`` routes: retrieve, documents, jobs, collections, presets."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException

from rag_service.errors import did_you_mean
from rag_service.server.errors import ApiError, ErrorResponseDoc, unreadable_body
from rag_service.server.schemas import (
    MAX_COLLECTION_CHARS,
    NO_NUL,
    CollectionsResponse,
    DeleteResponse,
    DocumentsRequest,
    IngestResponse,
    JobResponse,
    PresetResponse,
    PresetsResponse,
    PresetValues,
    ReindexRequest,
    RetrieveRequest,
    RetrieveResponse,
)
from rag_service.server.state import ReadState, ServerState, WriteState
from rag_service.service_documents import MAX_SOURCE_CHARS, DocumentBatch, NewDocument
from rag_service.service_paths import only_unsupported_uploads
from rag_service.uploads import safe_filename

router = APIRouter(prefix="/api", responses=ErrorResponseDoc)


#: the per-call knobs whose cost grows with their value, and the server setting bounding each on this route
_CAPPED = {"max_chunks": "max_chunks", "candidate_k": "max_candidate_k", "max_tokens": "max_tokens"}


def _check_caps(overrides: dict[str, Any], state: ServerState) -> None:
    """A per-call override past the server's cap (``RAG_API_MAX_CHUNKS``, ...) is a 422 naming it: a client,
    anonymous where reads are open, asked 25x the work and 75x the bytes of a stock preset per call."""
    for knob, setting in _CAPPED.items():
        cap = getattr(state.config, setting)
        if knob in overrides and overrides[knob] > cap:
            raise ApiError(
                422,
                "invalid_input",
                f"{knob}: {overrides[knob]}; send at most {cap} (the server's RAG_API_{setting.upper()}), "
                "or edit a preset (PUT /api/presets) for more",
            )


@router.post("/rag/retrieve", response_model=RetrieveResponse, tags=["retrieval"])
async def retrieve(body: RetrieveRequest, state: ReadState) -> JSONResponse:
    """Context for a query, shaped by a preset and per-call overrides (the Python ``retrieve``).

    The ``Server-Timing`` header gives the time of the ``retrieve()`` call itself (``retrieve;dur=ms``).
    A query longer than ``RAG_API_MAX_QUERY_CHARS`` (default 8000, what the library reads) is refused with 422.
    """
    limit = state.config.max_query_chars
    if len(body.query) > limit:
        raise ApiError(
            422,
            "invalid_input",
            f"query: {len(body.query)} characters; send at most {limit} (the server's RAG_API_MAX_QUERY_CHARS)",
        )
    _check_caps(body.given(), state)
    started = time.perf_counter()
    result = await state.run(
        state.service.retrieve,
        body.query,
        body.context,
        collection=body.collection,
        filters=body.filters,
        **body.given(),
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    state.metrics.observe_retrieval(result.metrics)
    data = result.to_dict()
    payload = {
        "success": True,
        "result": {
            "formatted_context": data["formatted_context"] if body.return_formatted else None,
            "chunks": data["chunks"],
            "documents": data["documents"],
            "total_tokens": data["total_tokens"],
            "sources": data["sources"],
            "query": data["query"],
            "context_type": data["context_type"],
        },
        "metrics": data["metrics"],
    }
    return JSONResponse(payload, headers={"Server-Timing": f"retrieve;dur={elapsed_ms:.2f}"})


_DOCUMENTS_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsRequest"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    "additionalProperties": False,
                    "properties": {
                        "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        "collection": {"type": "string", "minLength": 1, "maxLength": MAX_COLLECTION_CHARS},
                        "strategy": {"type": "string", "minLength": 1, "maxLength": 64},
                    },
                }
            },
        },
    }
}


@router.post(
    "/documents",
    response_model=IngestResponse,
    openapi_extra=_DOCUMENTS_BODY,
    tags=["documents"],
    responses={202: {"model": JobResponse, "description": "a large ingest runs as a job (Location: the job)"}},
)
async def add_documents(request: Request, state: WriteState) -> JSONResponse:
    """Index JSON texts, or files uploaded as multipart ``files`` (with ``collection``, ``strategy``).

    Up to ``RAG_API_JOB_THRESHOLD_CHARS`` characters of text (default 100,000) are indexed in the
    request: 200 with the ingest report, ``success`` false when a document failed (each failure is
    listed with its reason in ``report.failed``). More are indexed by a job: 202 with the job, whose
    progress counts documents as they are written (``GET /api/jobs/{id}``).
    """
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    service = state.service
    force = False
    if content_type == "multipart/form-data":
        collection, batch = await _upload(request, state)
    elif content_type == "application/json":
        body = _documents_body(await request.body())
        if len(body.documents) > state.config.max_documents:
            raise ApiError(
                413,
                "too_large",
                f"{len(body.documents)} documents in one call; send at most "
                f"{state.config.max_documents} (RAG_API_MAX_DOCUMENTS)",
            )
        collection, force = service.check_collection_name(body.collection), body.force
        batch = DocumentBatch([NewDocument(d.source, d.text, d.title, body.strategy) for d in body.documents])
    else:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"content type {content_type or 'none'!r}: send application/json or multipart/form-data",
        )
    if batch.chars > state.config.job_threshold_chars:
        job = state.jobs.start(
            "ingest",
            collection,
            lambda listen: service.index_documents(batch, collection=collection, force=force, listener=listen),
            total=len(batch.failed) + len(batch.documents),  # the 202 answer knows it, as the README says
        )
        return JSONResponse(
            {"success": True, "job": job.to_dict()}, status_code=202, headers={"Location": f"/api/jobs/{job.id}"}
        )
    report = await state.run(service.index_documents, batch, collection=collection, force=force)
    return JSONResponse({"success": report.ok, "report": report.to_dict()})


def _documents_body(raw: bytes) -> DocumentsRequest:
    """The JSON body of ``POST /api/documents``; errors read like every other route's (422)."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        error: dict[str, Any] = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error"}
        error["ctx"] = {"error": exc.msg}
        raise RequestValidationError([error]) from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, a number with too many digits, not UTF-8
        raise ApiError(400, "bad_request", unreadable_body(exc, "/api/documents")) from None  # as other routes say
    try:
        return DocumentsRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


async def _upload(request: Request, state: ServerState) -> tuple[str, DocumentBatch]:
    """The collection, and the uploaded files read by the service (``read_uploads``: its unread files failed)."""
    max_files = state.config.max_documents
    try:
        form = await request.form(max_files=max_files, max_fields=10)
    except HTTPException as exc:  # starlette's multipart parser refuses the body
        reason = str(exc.detail).rstrip(".")
        if reason.startswith("Too many files"):  # as the JSON form says it
            message = f"more than {max_files} files in one call; send at most {max_files} (RAG_API_MAX_DOCUMENTS)"
            raise ApiError(413, "too_large", message) from None
        message = f"multipart body could not be read ({reason}); send each file in the multipart field 'files'"
        raise ApiError(400, "bad_request", message) from None  # a malformed body, as broken JSON is
    try:
        fields = ("files", "collection", "strategy")
        unknown = sorted(set(form.keys()) - set(fields))
        if unknown:
            hint = did_you_mean(unknown[0], fields)
            message = f"unknown multipart field(s) {unknown}; {hint}use {', '.join(fields)}"
            raise ApiError(422, "invalid_input", message)
        files = form.getlist("files")
        if not files or not all(isinstance(f, UploadFile) for f in files):
            raise ApiError(422, "invalid_input", "send the documents as files in the multipart field 'files'")
        collection = _form_text(form, "collection", limit=MAX_COLLECTION_CHARS) or "default"
        collection = state.service.check_collection_name(collection)
        strategy = _form_text(form, "strategy", limit=64)
        names = [upload.filename or "" for upload in files if isinstance(upload, UploadFile)]
        if any(not name.strip() for name in names):  # the type check below read "" as a file named "."
            safe_filename("")  # its line: the file has no name
        if unsupported := only_unsupported_uploads(names):  # nothing would be indexed: as the CLI's exit 2
            raise ApiError(422, "unsupported_file_type", unsupported)
        uploads = [(upload.filename or "", await upload.read()) for upload in files if isinstance(upload, UploadFile)]
    finally:
        await form.close()
    return collection, await state.run(state.service.read_uploads, uploads, strategy=strategy)


def _form_text(form: FormData, name: str, *, limit: int) -> str | None:
    """A multipart text field given at most once, 1..limit characters; None when absent."""
    values = form.getlist(name)
    if not values:
        return None
    value = values[0]
    if len(values) > 1 or not isinstance(value, str) or not 1 <= len(value) <= limit or "\x00" in value:
        raise ApiError(422, "invalid_input", f"multipart field {name!r} must be one text of 1-{limit} characters")
    return value


@router.delete("/documents", response_model=DeleteResponse, tags=["documents"])
async def delete_document(
    source: Annotated[
        str, Query(min_length=1, max_length=MAX_SOURCE_CHARS, pattern=NO_NUL, description="the document's source")
    ],
    state: WriteState,
    collection: Annotated[str, Query(min_length=1, max_length=MAX_COLLECTION_CHARS, pattern=NO_NUL)] = "default",
) -> JSONResponse:
    """Delete one document (and its chunks) by source; 404 when the collection has no such document."""
    deleted = await state.run(state.service.delete_document, source, collection=collection)
    if not deleted:
        stored = await state.run(state.service.sources_like, source, collection=collection)
        keyed = "the stored source, as listed in results"
        if stored and not stored[0].endswith("/" + source.lstrip("/")):  # a checkout's file named by its disk path
            keyed = "a file in a checkout is stored relative to it, as listed in results"
        hint = f"; did you mean {' or '.join(map(repr, stored))}? ({keyed})"
        message = f"collection {collection!r} has no document with source {source!r}{hint if stored else ''}"
        raise ApiError(404, "not_found", message)
    return JSONResponse({"success": True, "deleted": deleted})


@router.post("/documents/reindex-all", status_code=202, response_model=JobResponse, tags=["documents"])
async def reindex_all(state: WriteState, body: Annotated[ReindexRequest | None, Body()] = None) -> JSONResponse:
    """Start re-chunking and re-embedding every stored document (of one collection) as a job."""
    collection = body.collection if body is not None else None
    state.jobs.check_free(collection)  # a 409 first: a first ingest still running makes the collection unknown
    if collection is not None:  # an unknown collection is a 404 now, not a job that "succeeds" with nothing
        await state.run(state.service.require_collection, collection)
        await state.run(state.service.check_not_indexing, collection)  # a CLI run: a 409 now, not a failed job
    service = state.service
    job = state.jobs.start(
        "reindex-all", collection, lambda listen: service.reindex_all(collection=collection, listener=listen)
    )
    return JSONResponse(
        {"success": True, "job": job.to_dict()}, status_code=202, headers={"Location": f"/api/jobs/{job.id}"}
    )


@router.get("/jobs/{job_id}", response_model=JobResponse, tags=["documents"])
async def get_job(job_id: Annotated[str, Path(max_length=64)], state: ReadState) -> JSONResponse:
    """A job's state (queued, running, succeeded, failed), counts and progress."""
    job = state.jobs.get(job_id)
    if job is None:
        kept = f"the server keeps running jobs and the last {state.jobs.keep} finished ones in memory until it restarts"
        raise ApiError(404, "not_found", f"no job {job_id[:64]!r}; {kept}")
    return JSONResponse({"success": True, "job": job.to_dict()})


@router.get("/collections", response_model=CollectionsResponse, tags=["catalog"])
async def collections(state: ReadState) -> JSONResponse:
    """Every collection with its document and chunk counts."""
    rows = await state.run(state.service.collections)
    return JSONResponse({"success": True, "collections": [row.to_dict() for row in rows]})


@router.get("/presets", response_model=PresetsResponse, tags=["catalog"])
async def presets(state: ReadState) -> JSONResponse:
    """Every context preset (rows of ``rag_configurations``)."""
    rows = await state.run(state.service.presets)
    return JSONResponse({"success": True, "presets": [asdict(row) for row in rows]})


@router.get("/presets/{context}", response_model=PresetResponse, tags=["catalog"])
async def get_preset(context: Annotated[str, Path(max_length=64)], state: ReadState) -> JSONResponse:
    """One context preset."""
    if "\x00" in context:  # checked here: a pattern on a bare path value leaves schemathesis nothing to break
        raise ApiError(422, "invalid_input", "context: must not contain NUL (\\x00) characters; remove them")
    preset = await state.run(state.service.preset, context)
    return JSONResponse({"success": True, "preset": asdict(preset)})


@router.put("/presets/{context}", response_model=PresetResponse, tags=["catalog"])
async def put_preset(
    context: Annotated[str, Path(max_length=64, pattern=NO_NUL)], body: PresetValues, state: WriteState
) -> JSONResponse:
    """Change some knobs of a preset row; validated like a per-call override. The next call follows it."""
    values = body.given()
    nulls = sorted(name for name in body.model_fields_set if getattr(body, name) is None)
    if nulls:  # null reads as "not given": say so rather than "no values"
        raise ApiError(422, "invalid_input", f"{', '.join(nulls)}: null is no value; send one, or leave it out")
    if not values:
        message = f'no values to change for preset {context[:64]!r}; send e.g. {{"max_chunks": 6}}'
        raise ApiError(422, "invalid_input", message)
    preset = await state.run(state.service.update_preset, context, **values)
    return JSONResponse({"success": True, "preset": asdict(preset)})
