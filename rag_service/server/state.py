"""What every route shares: the one service, the thread limiter, the guard, metrics and jobs."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from rag_service.server.auth import Guard
from rag_service.server.config import ServerConfig
from rag_service.server.errors import ApiError, error_response
from rag_service.server.jobs import JobRegistry
from rag_service.server.metrics import ApiMetrics
from rag_service.service import UniversalRAGService

T = TypeVar("T")


@dataclass(slots=True)
class ServerState:
    """The app's shared parts (``app.state.rag``)."""

    service: UniversalRAGService
    config: ServerConfig
    guard: Guard
    metrics: ApiMetrics
    jobs: JobRegistry
    limiter: CapacityLimiter
    #: the thread of ``/readyz``'s database check, apart from the requests' (whose threads a frozen database can
    #: all hold); one at a time, so a check stuck on such a database holds one thread, not one per probe
    probes: CapacityLimiter = field(default_factory=lambda: CapacityLimiter(1))
    #: the model warm-up started with the app (``/readyz`` waits for it); None when no lifespan ran
    warming: asyncio.Task[str | None] | None = None

    async def run(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
        """Run blocking ``fn`` on a worker thread; at most ``config.threads`` run at once."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self.limiter)


def server_state(request: Request) -> ServerState:
    """The shared state of the app serving ``request``."""
    state: ServerState = request.app.state.rag
    return state


_bearer = HTTPBearer(auto_error=False, description="RAG_API_TOKEN for writes; RAG_API_READ_TOKEN for reads when set")


def _token(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    return credentials.credentials if credentials is not None else None


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def need_read(request: Request, credentials: Credentials) -> ServerState:
    """Dependency of read routes: checks the read token when one is configured."""
    state = server_state(request)
    state.guard.read(_token(credentials))
    return state


def need_write(request: Request, credentials: Credentials) -> ServerState:
    """Dependency of write routes: checks the write token."""
    state = server_state(request)
    state.guard.write(_token(credentials))
    return state


async def write_refusal(state: ServerState, connection: HTTPConnection) -> JSONResponse | None:
    """The answer ``need_write`` would give ``connection`` (401, or 403 on a read-only server); None when it may
    write. For middleware that must not read a body (an upload's) before the token is checked."""
    try:
        state.guard.write(_token(await _bearer(connection)))
    except ApiError as exc:
        return error_response(exc.status, exc.code, exc.message, exc.headers)
    return None


#: a route parameter that is the shared state, after the read check
ReadState = Annotated[ServerState, Depends(need_read)]
#: a route parameter that is the shared state, after the write check
WriteState = Annotated[ServerState, Depends(need_write)]
