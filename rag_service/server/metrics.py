"""Prometheus metrics of one app: requests, latency per route and per retrieval stage, degraded stages, pool."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from sqlalchemy.pool import QueuePool

from rag_service.db.breaker import CLOSED, CircuitBreaker
from rag_service.result import RetrievalMetrics

#: seconds; retrieval runs from ~1 ms (cached SQL) to seconds (a cold reranker)
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_STAGES = ("embedding", "retrieval", "graph", "rerank", "expansion", "parents", "mmr", "format", "total")


class _PoolCollector(Collector):
    """Connection pool use and circuit state, read at scrape time."""

    def __init__(self, engine: Engine, breaker: CircuitBreaker) -> None:
        self._engine = engine
        self._breaker = breaker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pool = self._engine.pool
        if isinstance(pool, QueuePool):
            yield GaugeMetricFamily("rag_db_pool_size", "connections the pool keeps", value=pool.size())
            yield GaugeMetricFamily("rag_db_pool_checked_out", "connections in use", value=pool.checkedout())
            yield GaugeMetricFamily("rag_db_pool_overflow", "connections beyond the pool size", value=pool.overflow())
        yield GaugeMetricFamily(
            "rag_db_circuit_open", "1 while the circuit breaker keeps calls away", value=self._breaker.state != CLOSED
        )


class ApiMetrics:
    """The app's metrics in their own registry (so two apps in one process do not collide)."""

    def __init__(self, engine: Engine, breaker: CircuitBreaker) -> None:
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
        self.registry.register(_PoolCollector(engine, breaker))

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
