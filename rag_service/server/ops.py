"""Operations routes: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from rag_service.db.breaker import HALF_OPEN, OPEN
from rag_service.db.status import require_current_schema
from rag_service.errors import RagError
from rag_service.log import mask_url
from rag_service.server.errors import ErrorResponseDoc
from rag_service.server.state import ReadState, ServerState, server_state

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is alive and its event loop answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: ErrorResponseDoc[503]})
async def readyz(request: Request) -> JSONResponse:
    """Ready when the embedding model is warm, the database answers, its schema is at head and the
    circuit is not open (else 503).

    After the circuit's cool-down a successful check closes it again.
    """
    state = server_state(request)
    if state.warming is not None and not state.warming.done():
        problem: str | None = "warming up: loading the embedding model; ready in a few seconds"
    else:
        problem = await state.run(_readiness_problem, state)
    if problem is None:
        return JSONResponse({"status": "ready"})
    retry = str(max(int(state.service.db.breaker.cooldown), state.config.retry_after_s))
    return JSONResponse(
        {"success": False, "error": {"code": "not_ready", "message": problem}},
        status_code=503,
        headers={"Retry-After": retry},
    )


def _readiness_problem(state: ServerState) -> str | None:
    db = state.service.db
    circuit = db.breaker.state
    if circuit == OPEN:
        return f"circuit open: {db.url_for_display} failed repeatedly; calls resume after the cool-down"
    try:
        require_current_schema(db.engine)
    except RagError as exc:
        return mask_url(str(exc))
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        return mask_url(f"database {db.url_for_display} unreachable: {first[0] if first else type(exc).__name__}")
    if circuit == HALF_OPEN:
        db.breaker.success()  # the cool-down is over and the database answered: close the circuit
    return None


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
