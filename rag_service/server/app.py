"""``create_app``: the FastAPI app around one service, with limits, auth, metrics and the search page."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from anyio import CapacityLimiter
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import FileResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import Scope

from rag_service.server import api, ops
from rag_service.server.auth import Guard
from rag_service.server.config import ServerConfig
from rag_service.server.errors import install_error_handlers
from rag_service.server.hosts import HostPolicy, TrustedHosts, host_policy
from rag_service.server.jobs import JobRegistry
from rag_service.server.metrics import ApiMetrics
from rag_service.server.middleware import (
    BodyLimit,
    HeadAsGet,
    RequestMetrics,
    SecurityHeaders,
    TrailingSlashWrites,
    UnexpectedErrors,
)
from rag_service.server.state import ServerState, need_read, write_refusal
from rag_service.service import UniversalRAGService

STATIC = Path(__file__).resolve().parent / "static"


def create_app(
    service: UniversalRAGService,
    config: ServerConfig | None = None,
    *,
    owns_service: bool = False,
    hosts: HostPolicy | None = None,
) -> FastAPI:
    """The ASGI app serving ``service``; with ``owns_service`` it closes the service on shutdown. ``hosts``: the
    ``Host`` names it answers (``server/hosts.py``; default: a server bound to 127.0.0.1's)."""
    config = config or ServerConfig()
    hosts = hosts or host_policy(config, "127.0.0.1")[0]
    # the multipart parser logs each refused body's reason before raising it; the 422 already carries it
    logging.getLogger("python_multipart").setLevel(logging.ERROR)
    metrics = ApiMetrics(service.database_health)
    state = ServerState(
        service=service,
        config=config,
        guard=Guard(config),
        metrics=metrics,
        jobs=JobRegistry(on_finish=lambda job: metrics.jobs.labels(job.kind, job.state).inc()),
        limiter=CapacityLimiter(config.threads),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # the embedding model loads and runs once before /readyz says ready, not in the first request
        state.warming = asyncio.create_task(state.run(service.warm_up))
        yield
        service.stop_warm_up()  # a first start's model export: a stop does not wait for it
        with contextlib.suppress(Exception):
            await state.warming  # the service must not close under a loading model
        # running jobs stop at their next document before the service closes under them
        await asyncio.to_thread(state.jobs.shutdown, cancel=True)
        if owns_service:
            service.close()

    app = FastAPI(
        title="rag_service",
        version="0.1.0",
        summary="Retrieval on PostgreSQL + pgvector (PRD 08 §5)",
        docs_url=None,  # Swagger UI loads from a CDN; the page must work offline
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.rag = state
    cooldown_s = service.database_health().cooldown_s
    install_error_handlers(app, retry_after_s=max(int(cooldown_s), config.retry_after_s))
    app.include_router(api.router)
    app.include_router(ops.router)

    @app.get("/", include_in_schema=False)
    async def search_page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    if config.reads_token is None:
        _document_open_reads(app)

    def is_upload(scope: Scope) -> bool:
        content_type: bytes = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().lower()
        return bool(scope["path"] == "/api/documents" and content_type == b"multipart/form-data")

    def limit_for(scope: Scope) -> int:
        """Multipart uploads of documents get the upload limit; every other body (JSON too) the body limit."""
        return config.max_upload_bytes if is_upload(scope) else config.max_body_bytes

    async def refuse(scope: Scope) -> Response | None:
        """An upload without the write token: its 401 (403 read-only) at once, before ``BodyLimit`` holds up to
        the upload limit of its (chunked) body in memory; the route would refuse it only after that."""
        return await write_refusal(state, HTTPConnection(scope)) if is_upload(scope) else None

    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=config.cors_origins,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(TrailingSlashWrites)
    app.add_middleware(HeadAsGet)  # innermost but one: the metrics and error layers see the HEAD as sent
    app.add_middleware(BodyLimit, limit_for=limit_for, refuse=refuse)
    app.add_middleware(TrustedHosts, policy=hosts)  # before any route or body: DNS rebinding
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(UnexpectedErrors)  # outermost of ours but one: the one place an unexpected error is logged
    app.add_middleware(SecurityHeaders)  # outermost: its 500 gets them too
    return app


def _document_open_reads(app: FastAPI) -> None:
    """Without a read token, read routes need no credentials: say so in the OpenAPI document."""
    read_routes = {
        (route.path, method.lower())
        for route in (*api.router.routes, *ops.router.routes)
        if isinstance(route, APIRoute) and any(dep.call is need_read for dep in route.dependant.dependencies)
        for method in route.methods or ()
    }
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            for path, operations in document["paths"].items():
                for method, operation in operations.items():
                    if (path, method) in read_routes:
                        operation.pop("security", None)
                        operation["responses"].pop("401", None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
