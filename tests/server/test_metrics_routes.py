"""/metrics labels a HEAD request and a 413 with the route they were sent to, not ``unmatched``."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from rag_service.server.metrics import ApiMetrics
from rag_service.server.middleware import BodyLimit, HeadAsGet, RequestMetrics


class _Recorded(ApiMetrics):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def observe_request(self, *, method: str, route: str, status: int, seconds: float) -> None:
        self.seen.append((method, route, status))


def _app(metrics: ApiMetrics, *, routed: bool = False) -> FastAPI:
    """The app; ``routed``: its routes in an included ``APIRouter``, as ``create_app`` has them."""
    app = FastAPI()
    router = APIRouter() if routed else app.router

    @router.get("/api/presets/{context}")
    def preset(context: str) -> dict[str, str]:
        return {"context": context}

    @router.post("/api/rag/retrieve")
    def retrieve(body: dict[str, str]) -> dict[str, str]:
        return body

    if routed:
        app.include_router(router)
    app.add_middleware(HeadAsGet)  # in the order create_app adds them
    app.add_middleware(BodyLimit, limit_for=lambda scope: 100)
    app.add_middleware(RequestMetrics, metrics=metrics)
    return app


@pytest.mark.parametrize("routed", [False, True])
def test_head_and_413_are_counted_under_their_routes_and_a_stray_path_stays_unmatched(routed: bool) -> None:
    # HeadAsGet passed the router a copy of the scope, and BodyLimit answers before routing: both were "unmatched";
    # with the routes in an included router (FastAPI 0.165 keeps it as one route without a path) they still were
    metrics = _Recorded()
    with TestClient(_app(metrics, routed=routed)) as client:
        assert client.head("/api/presets/chatbot").status_code == 200
        assert client.post("/api/rag/retrieve", json={"query": "x" * 500}).status_code == 413
        assert client.post("/api/rag/retrieve", json={"query": "x"}).status_code == 200
        assert client.get("/no/such/path").status_code == 404
    assert metrics.seen == [
        ("HEAD", "/api/presets/{context}", 200),
        ("POST", "/api/rag/retrieve", 413),
        ("POST", "/api/rag/retrieve", 200),
        ("GET", "unmatched", 404),
    ]
