"""Operations routes: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from rag_service.server.errors import ErrorResponseDoc
from rag_service.server.state import ReadState, ServerState, server_state

router = APIRouter(tags=["operations"])

#: ``/readyz`` answers within this many seconds: a database that does not answer by then (frozen, overloaded,
#: a host gone) is not ready, and a load balancer must hear so in time to take the instance out
READY_TIMEOUT_S = 3.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive and its event loop answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: ErrorResponseDoc[503]})
async def readyz(request: Request) -> JSONResponse:
    """Ready when the embedding model is warm, the database answers within ``READY_TIMEOUT_S``, its schema is
    at head and the circuit is not open (else 503).

    After the circuit's cool-down a successful check closes it again.
    """
    state = server_state(request)
    if state.warming is not None and not state.warming.done():
        problem: str | None = "warming up: loading the embedding model; ready in a few seconds"
    else:
        problem = await _database_problem(state)
    if problem is None:
        return JSONResponse({"status": "ready"})
    retry = str(max(int(state.service.database_health().cooldown_s), state.config.retry_after_s))
    return JSONResponse(
        {"success": False, "error": {"code": "not_ready", "message": problem}},
        status_code=503,
        headers={"Retry-After": retry},
    )


async def _database_problem(state: ServerState) -> str | None:
    """The service's readiness problem, or that its database did not answer within ``READY_TIMEOUT_S``."""
    with anyio.move_on_after(READY_TIMEOUT_S):
        return await anyio.to_thread.run_sync(
            state.service.readiness_problem, limiter=state.probes, abandon_on_cancel=True
        )
    return (
        f"database {state.service.db.url_for_display} did not answer within {READY_TIMEOUT_S:g} s (frozen, "
        "overloaded or unreachable); check the database server and the network to it"
    )


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "exposition"},
        **{k: v for k, v in ErrorResponseDoc.items() if k in (401,)},
    },
)
async def metrics(state: ReadState) -> Response:
    """Prometheus text format: requests by route and status, stage latencies, degraded counts, pool use."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
