"""Pure ASGI middleware: request body limits (413) and request metrics by route template."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable

from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_service.errors import first_line
from rag_service.server.errors import error_response, trailing_slash_refusal
from rag_service.server.metrics import ApiMetrics

log = logging.getLogger(__name__)


class UnexpectedErrors:
    """Turn an unexpected exception into a 500 JSON error and ONE log line (its innermost frame).

    Caught here, it never reaches Starlette's error middleware or uvicorn, which would each log the
    traceback again; the whole traceback is logged at DEBUG only.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception as exc:
            log.error("unexpected error on %s %s: %s", scope["method"], scope["path"], one_line(exc))
            log.debug("traceback of the unexpected error", exc_info=True)
            if not started:
                response = error_response(500, "internal_error", "internal error; the server log has the details")
                await response(scope, receive, send)


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message (at file:line in function)`` of the innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{first_line(exc, typed=True)}{where}"


class BodyLimit:
    """Refuse bodies over a limit with 413: at once by Content-Length, else by reading first.

    The HTTP server holds a request to its Content-Length, so only bodies without one (chunked) are
    read here, up to the limit, and then handed on. ``limit_for(scope)`` gives each request's limit;
    ``refuse(scope)``, when given, an answer sent before any of the body is read (None: go on).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit_for: Callable[[Scope], int],
        refuse: Callable[[Scope], Awaitable[Response | None]] | None = None,
    ) -> None:
        self.app = app
        self.limit_for = limit_for
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = await self.refuse(scope) if self.refuse is not None else None
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > limit:
                await error_response(413, "too_large", _message(limit))(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        seen = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > limit:
                await error_response(413, "too_large", _message(limit))(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _message(limit: int) -> str:
    return f"request body is larger than {limit} bytes; send less (the limits are RAG_API_MAX_*_BYTES)"


class RequestMetrics:
    """Count requests by method, route template and status, and time them."""

    def __init__(self, app: ASGIApp, *, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            template = getattr(scope.get("route"), "path", None) or _route_template(scope)
            self.metrics.observe_request(
                method=scope["method"], route=template, status=status, seconds=time.perf_counter() - started
            )


def _route_template(scope: Scope) -> str:
    """The path template of the app's route that takes ``scope`` when the router did not see it (BodyLimit's
    413 answers before routing; ``HeadAsGet`` routes a copy as GET); ``"unmatched"`` when none takes its path
    and method, so the labels stay few."""
    probe = {**scope, "method": "GET"} if scope["method"] == "HEAD" else scope  # HeadAsGet answers HEAD as GET
    return _template(getattr(getattr(scope.get("app"), "router", None), "routes", ()), probe) or "unmatched"


def _template(routes: Iterable[BaseRoute], scope: Scope) -> str | None:
    """The path of the first of ``routes`` taking ``scope``, looking into included routers (FastAPI keeps each
    ``include_router`` as one route without a path, whose own routes carry the full paths)."""
    for route in routes:
        if route.matches(scope)[0] is not Match.FULL:
            continue
        inner = getattr(getattr(route, "original_router", None), "routes", None)
        return getattr(route, "path", None) or (_template(inner, scope) if inner is not None else None)
    return None


class HeadAsGet:
    """Answer ``HEAD`` as the route's ``GET`` without its body (HTTP: a resource that answers GET answers HEAD);
    uptime checks and load balancers send it, and FastAPI's routes answered 405."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        # the router's match lands in this copy: the metrics outside find a HEAD's route themselves
        await self.app({**scope, "method": "GET"}, receive, send_headers_only)


class TrailingSlashWrites:
    """A write to a path with a trailing slash that no route takes is a 404 naming the endpoint: the router's
    307 sent ``PUT /api/presets/`` to ``/api/presets``, which refuses PUT (GET and HEAD keep the redirect)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD"):
            refusal = trailing_slash_refusal(scope["app"], scope["method"], scope["path"])
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


#: the search page's policy (its script and styles are files of /static) and, for every other answer, framing
#: refused: the page takes a token, so no other site may frame it (clickjacking)
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
]


class SecurityHeaders:
    """Security headers on every answer, and its caching: the page and its files are revalidated each time
    (``no-cache``: a server upgraded under a browser's cache serves its new script, not a stale one by the ETag),
    everything else (API answers, which may be a token's) is never stored (``no-store``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        page = scope["path"] == "/" or scope["path"].startswith("/static/")
        caching = (b"cache-control", b"no-cache" if page else b"no-store")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [header for header in (*_SECURITY_HEADERS, caching) if header[0] not in names]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
