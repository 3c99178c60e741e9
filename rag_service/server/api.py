"""The ``/api`` routes: retrieve, documents, jobs, collections, presets."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import asdict
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException

from rag_service.db.catalog import delete_by_source, update_preset
from rag_service.db.collections import list_collections, validate_collection
from rag_service.db.locks import lock_for_edit
from rag_service.db.presets import list_presets, load_preset
from rag_service.errors import RagError
from rag_service.ingest.loaders import load_document
from rag_service.ingest.progress import ProgressListener
from rag_service.ingest.report import FileProblem, IngestReport
from rag_service.ingest.strategies import recommend_strategy
from rag_service.server.errors import ApiError, ErrorResponseDoc
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
from rag_service.server.uploads import forget_upload, staging_folder, store_upload
from rag_service.service import UniversalRAGService

router = APIRouter(prefix="/api", responses=ErrorResponseDoc)


@router.post("/rag/retrieve", response_model=RetrieveResponse, tags=["retrieval"])
async def retrieve(body: RetrieveRequest, state: ReadState) -> JSONResponse:
    """Context for a query, shaped by a preset and per-call overrides (the Python ``retrieve``).

    The ``Server-Timing`` header gives the time of the ``retrieve()`` call itself (``retrieve;dur=ms``).
    A query longer than ``RAG_API_MAX_QUERY_CHARS`` is refused with 422.
    """
    limit = state.config.max_query_chars
    if len(body.query) > limit:
        raise ApiError(
            422,
            "invalid_input",
            f"query: {len(body.query)} characters; send at most {limit} (the server's RAG_API_MAX_QUERY_CHARS)",
        )
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


#: documents to index, grouped by chunking strategy: strategy -> [(source, title, text)]
Groups = dict[str, list[tuple[str, str, str]]]


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
    force = False
    if content_type == "multipart/form-data":
        collection, groups, failed = await _upload(request, state)
    elif content_type == "application/json":
        body = _documents_body(await request.body())
        if len(body.documents) > state.config.max_documents:
            raise ApiError(
                413,
                "too_large",
                f"{len(body.documents)} documents in one call; send at most "
                f"{state.config.max_documents} (RAG_API_MAX_DOCUMENTS)",
            )
        collection, force, failed = validate_collection(body.collection), body.force, []
        groups = {body.strategy: [(d.source, d.title, d.text) for d in body.documents]}
    else:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"content type {content_type or 'none'!r}: send application/json or multipart/form-data",
        )
    service = state.service
    if sum(len(text) for items in groups.values() for _, _, text in items) > state.config.job_threshold_chars:
        job = state.jobs.start(
            "ingest", collection, lambda listen: _index_groups(service, collection, groups, failed, force, listen)
        )
        return JSONResponse(
            {"success": True, "job": job.to_dict()}, status_code=202, headers={"Location": f"/api/jobs/{job.id}"}
        )
    report = await state.run(_index_groups, service, collection, groups, failed, force, None)
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
        message = f"body could not be read as JSON ({type(exc).__name__}); send UTF-8 JSON at most 16 levels deep"
        raise ApiError(422, "invalid_input", message) from None
    try:
        return DocumentsRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def _index_groups(
    service: UniversalRAGService,
    collection: str,
    groups: Groups,
    failed: list[FileProblem],
    force: bool,
    listen: ProgressListener | None,
) -> IngestReport:
    """Index each strategy's documents; ``listen`` hears documents done (failed uploads first) of all."""
    report = IngestReport(collection=collection, failed=list(failed))
    total = len(failed) + sum(len(items) for items in groups.values())
    done = len(failed)
    if listen is not None:
        listen(done, total)
    for strategy, items in groups.items():
        hear = None if listen is None else functools.partial(_shifted, listen, done, total)
        report.merge(service.index_texts(items, collection=collection, strategy=strategy, force=force, listener=hear))
        done += len(items)
    return report


def _shifted(listen: ProgressListener, before: int, total: int, done: int, _part_total: int | None) -> None:
    """One strategy's progress as progress of the whole request."""
    listen(before + done, total)


async def _upload(request: Request, state: ServerState) -> tuple[str, Groups, list[FileProblem]]:
    """The collection, the uploaded files' texts by strategy, and the files that could not be read.

    Files are staged under ``uploads/`` only while they are read (see ``server/uploads.py``).
    """
    max_files = state.config.max_documents
    try:
        form = await request.form(max_files=max_files, max_fields=10)
    except HTTPException as exc:  # starlette's multipart parser refuses the body
        reason = str(exc.detail).rstrip(".")
        message = f"multipart body could not be read ({reason}); send each file in the multipart field 'files'"
        raise ApiError(422, "invalid_input", message) from None
    try:
        unknown = sorted(set(form.keys()) - {"files", "collection", "strategy"})
        if unknown:
            raise ApiError(
                422, "invalid_input", f"unknown multipart field(s) {unknown}; use files, collection, strategy"
            )
        files = form.getlist("files")
        if not files or not all(isinstance(f, UploadFile) for f in files):
            raise ApiError(422, "invalid_input", "send the documents as files in the multipart field 'files'")
        collection = validate_collection(_form_text(form, "collection", limit=MAX_COLLECTION_CHARS) or "default")
        strategy = _form_text(form, "strategy", limit=64)
        uploads = [(upload.filename or "", await upload.read()) for upload in files if isinstance(upload, UploadFile)]
    finally:
        await form.close()
    groups, failed = await state.run(_load_uploads, state, uploads, strategy)
    return collection, groups, failed


def _load_uploads(
    state: ServerState, uploads: list[tuple[str, bytes]], strategy: str | None
) -> tuple[Groups, list[FileProblem]]:
    """Stage each file, load its text, and remove the staged files (kept or refused) at once."""
    groups: Groups = {}
    failed: list[FileProblem] = []
    with staging_folder(_uploads_root(state)) as folder:
        for filename, data in uploads:
            path = store_upload(folder, filename, data)
            try:
                loaded = load_document(path, max_bytes=state.service.settings.max_file_bytes)
            except RagError as exc:
                failed.append(FileProblem(path.name, str(exc).replace(str(path), path.name)))
                continue
            groups.setdefault(strategy or recommend_strategy(path), []).append((path.name, loaded.title, loaded.text))
    return groups, failed


def _form_text(form: FormData, name: str, *, limit: int) -> str | None:
    """A multipart text field given at most once, 1..limit characters; None when absent."""
    values = form.getlist(name)
    if not values:
        return None
    value = values[0]
    if len(values) > 1 or not isinstance(value, str) or not 1 <= len(value) <= limit or "\x00" in value:
        raise ApiError(422, "invalid_input", f"multipart field {name!r} must be one text of 1-{limit} characters")
    return value


def _uploads_root(state: ServerState) -> FilePath:
    return state.service.settings.data_dir / "uploads"


@router.delete("/documents", response_model=DeleteResponse, tags=["documents"])
async def delete_document(
    source: Annotated[str, Query(min_length=1, max_length=1000, pattern=NO_NUL, description="the document's source")],
    state: WriteState,
    collection: Annotated[str, Query(min_length=1, max_length=MAX_COLLECTION_CHARS, pattern=NO_NUL)] = "default",
) -> JSONResponse:
    """Delete one document (and its chunks) by source; 404 when the collection has no such document."""
    deleted = await state.run(_delete, state, collection, source)
    if not deleted:
        raise ApiError(404, "not_found", f"collection {collection!r} has no document with source {source!r}")
    return JSONResponse({"success": True, "deleted": deleted})


def _delete(state: ServerState, collection: str, source: str) -> int:
    with state.service.db.transaction() as session:
        lock_for_edit(session, collection)  # a running ingest or reindex would write the document back
        deleted = delete_by_source(session, collection=collection, source=source)
    if deleted:
        forget_upload(_uploads_root(state), collection, source)
    return deleted


@router.post("/documents/reindex-all", status_code=202, response_model=JobResponse, tags=["documents"])
async def reindex_all(state: WriteState, body: Annotated[ReindexRequest | None, Body()] = None) -> JSONResponse:
    """Start re-chunking and re-embedding every stored document (of one collection) as a job."""
    collection = body.collection if body is not None else None
    if collection is not None:  # an unknown collection is a 404 now, not a job that "succeeds" with nothing
        await state.run(state.service.require_collection, collection)
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
        raise ApiError(404, "not_found", f"no job {job_id[:64]!r}; jobs are kept in memory until the server restarts")
    return JSONResponse({"success": True, "job": job.to_dict()})


@router.get("/collections", response_model=CollectionsResponse, tags=["catalog"])
async def collections(state: ReadState) -> JSONResponse:
    """Every collection with its document and chunk counts."""
    rows = await state.run(state.service.db.read, list_collections)
    return JSONResponse({"success": True, "collections": [asdict(row) for row in rows]})


@router.get("/presets", response_model=PresetsResponse, tags=["catalog"])
async def presets(state: ReadState) -> JSONResponse:
    """Every context preset (rows of ``rag_configurations``)."""
    rows = await state.run(state.service.db.read, list_presets)
    return JSONResponse({"success": True, "presets": [asdict(row) for row in rows]})


@router.get("/presets/{context}", response_model=PresetResponse, tags=["catalog"])
async def get_preset(context: Annotated[str, Path(max_length=64)], state: ReadState) -> JSONResponse:
    """One context preset."""
    if "\x00" in context:  # checked here: a pattern on a bare path value leaves schemathesis nothing to break
        raise ApiError(422, "invalid_input", "context must not contain NUL (\\x00) characters")
    preset = await state.run(state.service.db.read, lambda session: asdict(load_preset(session, context)))
    return JSONResponse({"success": True, "preset": preset})


@router.put("/presets/{context}", response_model=PresetResponse, tags=["catalog"])
async def put_preset(
    context: Annotated[str, Path(max_length=64, pattern=NO_NUL)], body: PresetValues, state: WriteState
) -> JSONResponse:
    """Change some knobs of a preset row; validated like a per-call override. The next call follows it."""
    values = body.given()
    if not values:
        message = f'no values to change for preset {context[:64]!r}; send e.g. {{"max_chunks": 6}}'
        raise ApiError(422, "invalid_input", message)
    preset = await state.run(_put_preset, state, context, values)
    return JSONResponse({"success": True, "preset": preset})


def _put_preset(state: ServerState, context: str, values: dict[str, Any]) -> dict[str, Any]:
    with state.service.db.transaction() as session:
        return asdict(update_preset(session, context, values))
