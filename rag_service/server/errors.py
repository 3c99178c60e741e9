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
PoolExhaustedError                 503     database_busy          (with Retry-After)
DiskFullError                      507     disk_full              (no retry until disk space is freed)
ModelLoadError                     503     model_unavailable      (with Retry-After)
request validation (pydantic)      422     invalid_input
a body that cannot be parsed       400     bad_request            (broken JSON encoding or multipart too)
a body not sent as JSON            415     unsupported_media_type (its Content-Type says another type)
an unknown path / a wrong method   404/405 not_found / method_not_allowed (the nearest endpoint, Allow)
anything else                      500     internal_error (one log line: UnexpectedErrors, middleware.py)
"""

from __future__ import annotations

import logging
import re
import sys
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Mount, Route

from rag_service.errors import (
    SHOWN_NAME_CHARS,
    DatabaseError,
    DatabaseUnavailableError,
    DiskFullError,
    ModelLoadError,
    PoolExhaustedError,
    RagError,
    ReindexInProgressError,
    StatementTimeoutError,
    UnknownCollectionError,
    UnknownContextError,
    closest_name,
    first_line,
    shown_name,
)
from rag_service.knobs import PRESET_KNOBS, name_hint
from rag_service.log import mask_url
from rag_service.server.schemas import NO_NUL

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
    if isinstance(exc, PoolExhaustedError):
        return ApiError(503, "database_busy", message, headers=retry)
    if isinstance(exc, DiskFullError):
        return ApiError(507, "disk_full", message)
    if isinstance(exc, DatabaseError):
        return ApiError(503, "database_not_ready", message, headers=retry)
    if isinstance(exc, ModelLoadError):
        return ApiError(503, "model_unavailable", message, headers=retry)
    return ApiError(422, "invalid_input", message)


#: the smallest body of each JSON route, the example of a fix that names the body
_EXAMPLES = {
    "/api/rag/retrieve": '{"query": "backups"}',
    "/api/documents": '{"documents": [{"source": "notes.md", "text": "# Notes"}]}',
    "/api/documents/reindex-all": '{"collection": "default"}',
    "/api/presets/{context}": '{"max_chunks": 6}',
}


def send_json(route: str | None) -> str:
    """The fix of a body that was not one JSON object, with the body of ``route`` (a path template) as example."""
    example = _EXAMPLES.get(route or "")
    shown = f", e.g. {example}," if example else ""
    return f"send one JSON object{shown} with the header Content-Type: application/json"


def _route(request: Request) -> str | None:
    return getattr(request.scope.get("route"), "path", None)


def content_type_refusal(exc: RequestValidationError, request: Request) -> str | None:
    """A 415's line when the body was not read as JSON for its Content-Type (the documents route answers so too);
    None for any other problem."""
    first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
    kinds = ("model_attributes_type", "model_type", "dict_type")
    content_type = request.headers.get("content-type")
    if tuple(first.get("loc", ())) != ("body",) or first.get("type") not in kinds:
        return None
    if content_type is not None and "json" in content_type.lower():
        return None
    shown = repr(content_type[:80]) if content_type else "missing"
    return f"Content-Type is {shown}, so the body was not read as JSON; {send_json(_route(request))}"


def _validation_message(exc: RequestValidationError, request: Request) -> str:
    """The first problem as one line naming the field (or the body) and the fix."""
    first: dict[str, Any] = exc.errors()[0] if exc.errors() else {}
    loc = tuple(first.get("loc", ()))
    kind = first.get("type", "")
    fix = send_json(_route(request))
    if kind == "json_invalid":
        reason = (first.get("ctx") or {}).get("error") or first.get("msg", "invalid")
        at = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
        return f"body is not valid JSON ({reason}{at}); {fix}"
    if loc == ("body",) and kind == "missing":
        return f"body is missing; {fix}"
    if loc == ("body",) and kind in ("model_attributes_type", "model_type", "dict_type"):
        return f"body must be a JSON object, not {type(first.get('input')).__name__}; {fix}"
    if len(loc) == 2 and loc[0] == "query" and kind == "missing":
        return _missing_parameter(str(loc[1]), request)
    where = ".".join(_shown_part(part) for part in loc if part != "body")
    if kind == "string_pattern_mismatch" and (first.get("ctx") or {}).get("pattern") == NO_NUL:
        return f"{where}: must not contain NUL (\\x00) characters; remove them"  # as every body field says
    if kind == "extra_forbidden" and len(loc) == 2 and (fields := _body_fields(request)):
        hint = name_hint(str(loc[1]), fields)  # top_k: max_chunks, as Python and the CLI say
        return f"{where}: unknown field; {hint}the fields are {', '.join(fields)}"
    knob = PRESET_KNOBS.get(str(loc[1])) if len(loc) == 2 and loc[0] == "body" else None
    if knob is not None and kind != "missing" and (problem := knob.sent_problem(first.get("input"))) is not None:
        return problem  # the library's line, as Python and the CLI give it (pydantic's named one bound, no fix)
    if kind == "bool_type":  # strict: "yes", "off", 1 are no booleans
        return f"{where}: must be true or false (JSON booleans), not {first.get('input')!r:.60}"
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _shown_part(part: object) -> str:
    """A field name of the request as a message shows it: as it is when plain, else quoted and cut (a JSON key may
    hold a newline, which broke the one-line message, or be 10,000 characters long)."""
    text = str(part)
    plain = text.isprintable() and not any(ch.isspace() for ch in text) and len(text) <= SHOWN_NAME_CHARS
    return text if plain else shown_name(text)


def _operation(request: Request) -> tuple[dict[str, Any], dict[str, Any]]:
    """The OpenAPI document and the request's operation in it (empty when the route has none)."""
    route = request.scope.get("route")
    document = request.app.openapi()
    return document, document["paths"].get(getattr(route, "path", None), {}).get(request.method.lower(), {})


def _missing_parameter(name: str, request: Request) -> str:
    """A required query parameter is missing: the request as it should be, every parameter of the route in it
    (a JSON body with the fields is not read: ``DELETE /api/documents`` takes them in the URL)."""
    _, operation = _operation(request)
    names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"] or [name]
    example = "&".join(f"{n}=<{n}>" for n in names)
    sent_body = request.headers.get("content-length", "0") != "0" or "transfer-encoding" in request.headers
    unread = "; a body is not read here" if sent_body else ""
    return f"{name}: a query parameter, missing; send {request.method} {request.url.path}?{example}{unread}"


def _body_fields(request: Request) -> list[str]:
    """The top-level fields of the route's JSON body, from the OpenAPI document (empty when it has none)."""
    document, operation = _operation(request)
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    # an optional body (reindex-all's) is ``anyOf: [{$ref}, {type: null}]``: its object's fields
    schema = next((s for s in schema.get("anyOf", []) if "$ref" in s), schema)
    if "$ref" in schema:
        schema = document.get("components", {}).get("schemas", {}).get(schema["$ref"].rsplit("/", 1)[-1], {})
    return list(schema.get("properties", {}))


def unreadable_body(cause: BaseException | None, route: str | None = None) -> str:
    """A 400 for a body that could not be parsed, with the parser's reason (e.g. nesting too deep); ``route``, the
    path template, gives the example of the fix."""
    fix = send_json(route)
    if isinstance(cause, RecursionError):
        return "body nests objects or arrays too deeply to read; send at most 16 levels"
    if isinstance(cause, UnicodeDecodeError):
        bad = cause.object[cause.start : cause.start + 1].hex()
        return f"body is not UTF-8 (byte 0x{bad} at offset {cause.start}); encode it as UTF-8 and {fix}"
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):  # Python's digit limit
        return f"body holds a number of over {sys.get_int_max_str_digits()} digits, which no field takes; {fix}"
    reason = first_line(cause, limit=200) if cause is not None else "no reason given"
    return f"body could not be read as JSON ({reason}); {fix}"


def _no_route(request: Request, exc: StarletteHTTPException) -> tuple[str, dict[str, str]] | None:
    """The router's own 404 or 405 as a line naming the request and where to go (and a 405's whole ``Allow``
    header: the router's names the first route of the path only); None for any other error."""
    if exc.status_code not in (404, 405) or exc.detail != HTTPStatus(exc.status_code).phrase:
        return None
    path = request.url.path[:200]
    asked = f"{request.method} {path}"
    # the OpenAPI document, not app.routes: it is built once, and included routers stay whole in app.routes
    endpoints = {route: sorted(m.upper() for m in ops) for route, ops in request.app.openapi()["paths"].items()}
    if exc.status_code == 405:
        every = endpoints | _unlisted_endpoints(request.app)
        allowed = ", ".join(sorted({m for r, ms in every.items() if _route_pattern(r).fullmatch(path) for m in ms}))
        headers = {**(exc.headers or {}), **({"Allow": allowed} if allowed else {})}
        return f"{asked} is not allowed; {path} takes {allowed or 'other methods'}", headers
    near = closest_name(path, endpoints, cutoff=0.75)
    hint = f"did you mean {'|'.join(endpoints[near])} {near}? " if near else ""
    message = f"{asked}: no such endpoint; {hint}search is POST /api/rag/retrieve, every endpoint is in /openapi.json"
    return message, dict(exc.headers or {})


def _unlisted_endpoints(app: FastAPI) -> dict[str, list[str]]:
    """The routes the OpenAPI document leaves out (the search page, ``/openapi.json``) and the static files' mount
    (``/static/{path}``), with their methods; HEAD is left out, as the document leaves it out."""
    found: dict[str, list[str]] = {}
    for route in app.routes:
        if isinstance(route, Mount):
            found[f"{route.path}/{{path}}"] = ["GET"]
        elif isinstance(route, Route) and not route.include_in_schema:
            found[route.path] = sorted((route.methods or set()) - {"HEAD"})
    return found


def trailing_slash_refusal(app: FastAPI, method: str, path: str) -> JSONResponse | None:
    """A 404 naming the endpoint for a write to a path with a trailing slash that no route takes with or without
    it (the router's 307 went to a path refusing the method: ``PUT /api/presets/``); None when one does."""
    if not path.endswith("/") or path == "/":
        return None
    takes = sorted(route for route, ops in app.openapi()["paths"].items() if method.lower() in ops)
    if any(_route_pattern(route).fullmatch(p) for route in takes for p in (path, path.rstrip("/"))):
        return None  # served here, or the redirect keeps the method (307) and lands on a route taking it
    near = closest_name(path.rstrip("/"), takes, cutoff=0.6)
    hint = f"did you mean {method} {near}? " if near else ""
    return error_response(
        404, "not_found", f"{method} {path[:200]}: no such endpoint; {hint}every endpoint is in /openapi.json"
    )


def _route_pattern(route: str) -> re.Pattern[str]:
    """An OpenAPI path (``/api/presets/{context}``) as a pattern of the paths it serves."""
    return re.compile(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(route)))


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
        if (refusal := content_type_refusal(exc, request)) is not None:  # as POST /api/documents answers it
            return error_response(415, "unsupported_media_type", refusal)
        return error_response(422, "invalid_input", _validation_message(exc, request))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        if exc.status_code == 400 and exc.__cause__ is not None:
            message = unreadable_body(exc.__cause__, _route(request))
            return error_response(400, code, message, dict(exc.headers or {}))
        detail, headers = _no_route(request, exc) or (str(exc.detail), dict(exc.headers or {}))
        return error_response(exc.status_code, code, detail, headers)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RagError, on_rag_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


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
        507: "the database server has no disk space left for a write (nothing of it was kept)",
    }
    return {status: {"model": ErrorResponse, "description": text} for status, text in reasons.items()}


#: the error responses every API route documents in the OpenAPI document
ErrorResponseDoc = _error_docs()
