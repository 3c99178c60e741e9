"""Prometheus metrics of one app: requests, latency per route and per retrieval stage, degraded stages, pool."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from rag_service.result import RetrievalMetrics

if TYPE_CHECKING:
    from rag_service import DatabaseHealth

#: seconds; retrieval runs from ~1 ms (cached SQL) to seconds (a cold reranker)
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_STAGES = ("embedding", "retrieval", "graph", "rerank", "llm", "expansion", "parents", "mmr", "format", "total")


class _PoolCollector(Collector):
    """Connection pool use and circuit state, read at scrape time (``UniversalRAGService.database_health``)."""

    def __init__(self, health: Callable[[], DatabaseHealth]) -> None:
        self._health = health

    def collect(self) -> Iterator[GaugeMetricFamily]:
        health = self._health()
        if health.pool_size is not None:
            yield GaugeMetricFamily("rag_db_pool_size", "connections the pool keeps", value=health.pool_size)
            yield GaugeMetricFamily("rag_db_pool_checked_out", "connections in use", value=health.checked_out)
            yield GaugeMetricFamily("rag_db_pool_overflow", "connections beyond the pool size", value=health.overflow)
        yield GaugeMetricFamily(
            "rag_db_circuit_open", "1 while the circuit breaker keeps calls away", value=not health.circuit_closed
        )


class ApiMetrics:
    """The app's metrics in their own registry (so two apps in one process do not collide)."""

    def __init__(self, health: Callable[[], DatabaseHealth]) -> None:
        """``health``: the database's pool and circuit now, asked at every scrape."""
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "rag_http_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "rag_http_request_duration_seconds",
            "HTTP request latency",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.stage = Histogram(
            "rag_retrieval_stage_duration_seconds",
            "time per retrieval stage",
            ["stage"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.degraded = Counter(
            "rag_retrieval_degraded", "retrievals with a stage not run as configured", ["stage"], registry=self.registry
        )
        self.jobs = Counter("rag_jobs", "background jobs finished", ["kind", "state"], registry=self.registry)
        self.registry.register(_PoolCollector(health))

    def observe_request(self, *, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request and its latency."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def observe_retrieval(self, metrics: RetrievalMetrics) -> None:
        """Stage timings and degraded stages of one retrieve call."""
        values = metrics.to_dict()
        for stage in _STAGES:
            self.stage.labels(stage).observe(float(values[f"{stage}_time_ms"]) / 1000.0)
        for reason in metrics.degraded:
            self.degraded.labels(reason.split(":", 1)[0]).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
