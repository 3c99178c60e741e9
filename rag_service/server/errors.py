"""Every failure as JSON ``{success: false, error: {code, message}}``; never a traceback.

RagError subclass                  status  code
ConfigurationError, QueryError,    422     invalid_input
  ChunkingError, IngestError
UnknownContextError                404     unknown_context
UnknownCollectionError             404     unknown_collection
JobConflictError                   409     job_conflict
ReindexInProgressError             409     reindex_in_progress
DatabaseUnavailableError,          503     database_unavailable   (with Retry-After)
  SchemaError, other DatabaseError
StatementTimeoutError              503     statement_timeout      (with Retry-After)
ModelLoadError                     503     model_unavailable      (with Retry-After)
request validation (pydantic)      422     invalid_input
a body that cannot be parsed       400     bad_request
anything else                      500     internal_error (logged with its traceback, not sent)
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_service.errors import (
    DatabaseError,
    DatabaseUnavailableError,
    ModelLoadError,
    RagError,
    ReindexInProgressError,
    StatementTimeoutError,
    UnknownCollectionError,
    UnknownContextError,
)
from rag_service.log import mask_url

log = logging.getLogger(__name__)


class JobConflictError(RagError):
    """A job on an overlapping collection is still queued or running (HTTP 409)."""


class ApiError(Exception):
    """An HTTP error with a stable machine-readable code and a one-line message."""

    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON body every error has."""
    body = {"success": False, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def from_rag_error(exc: RagError, *, retry_after_s: int) -> ApiError:
    """Map a library error to its HTTP status and code (see the table above)."""
    message = mask_url(str(exc))
    retry = {"Retry-After": str(retry_after_s)}
    if isinstance(exc, UnknownContextError):
        return ApiError(404, "unknown_context", message)
    if isinstance(exc, UnknownCollectionError):
        return ApiError(404, "unknown_collection", message)
    if isinstance(exc, JobConflictError):
        return ApiError(409, "job_conflict", message)
    if isinstance(exc, ReindexInProgressError):
        return ApiError(409, "reindex_in_progress", message)
    if isinstance(exc, DatabaseUnavailableError):
        return ApiError(503, "database_unavailable", message, headers=retry)
    if isinstance(exc, StatementTimeoutError):
        return ApiError(503, "statement_timeout", message, headers=retry)
    if isinstance(exc, DatabaseError):
        return ApiError(503, "database_not_ready", message, headers=retry)
    if isinstance(exc, ModelLoadError):
        return ApiError(503, "model_unavailable", message, headers=retry)
    return ApiError(422, "invalid_input", message)


def _validation_message(exc: RequestValidationError) -> str:
    first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "request"
    return f"{where}: {first.get('msg', 'invalid value')}"


def install_error_handlers(app: FastAPI, *, retry_after_s: int) -> None:
    """Register the handlers that turn every exception into the JSON error shape."""

    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def on_rag_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RagError)
        return await on_api_error(request, from_rag_error(exc, retry_after_s=retry_after_s))

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(422, "invalid_input", _validation_message(exc))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail), dict(exc.headers or {}))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal error; the server log has the details")

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RagError, on_rag_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)


def _error_docs() -> dict[int | str, dict[str, Any]]:
    from rag_service.server.schemas import ErrorResponse

    reasons = {
        400: "malformed body (not JSON, not UTF-8, broken multipart)",
        401: "missing or wrong bearer token",
        403: "a write on a read-only server (no RAG_API_TOKEN)",
        404: "unknown context, collection, document or job",
        409: "a job or reindex on the same collection is running",
        413: "request body over the size limit",
        415: "unsupported content type",
        422: "invalid input (the message names the field and the fix)",
        503: "database down, schema not at head, circuit open, statement timeout or model not loadable "
        "(see Retry-After)",
    }
    return {status: {"model": ErrorResponse, "description": text} for status, text in reasons.items()}


#: the error responses every API route documents in the OpenAPI document
ErrorResponseDoc = _error_docs()
