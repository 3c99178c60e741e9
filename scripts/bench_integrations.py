"""Overhead of the integrations over a direct ``retrieve()``: LangChain, LlamaIndex, aretrieve, MCP.

    .venv/bin/python scripts/bench_integrations.py                 # hashing embedder
    .venv/bin/python scripts/bench_integrations.py --model all-MiniLM-L6-v2 --steps 500

The repository's docs/ and README.md are indexed into a database of their own
(``rag_bench_integrations`` on the embedded server, or on the server of ``RAG_DATABASE_URL``),
reranking off. Each step runs one query through every variant in a fresh random order, so load from
elsewhere hits them alike: the direct ``retrieve()``, ``await aretrieve()``, the LangChain retriever's
``invoke``/``ainvoke``, the LlamaIndex retriever's ``retrieve``/``aretrieve`` and (``--mcp``, the
default) a ``search_knowledge`` call to a ``rag mcp`` subprocess through the SDK's client. The
overhead of a variant is the median over steps of (variant - direct) for the same query in the same
step; p50 differences are reported too. Budget for the in-process adapters: <= 1 ms at p50.

On a busy machine the end-to-end differences drown in the noise of the search itself, so the
adapters are also timed alone (``--adapter-steps``): over a service whose ``retrieve()`` answers a
query it has already run from memory (``ReplayService``), an adapter call costs what the adapter adds
(conversion to the framework's types, its callbacks, the thread hand-off of the async paths), and
that cost is compared with the replayed ``retrieve()`` itself.

Outputs: ``--json`` (default bench_out/integrations.json) and the section between the
``integrations`` markers of docs/benchmarks.md (``--markdown``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import psycopg
from psycopg import sql
from scripts_util import replace_section

from rag_service.config import Settings, load_settings
from rag_service.db import migrate
from rag_service.db.admin import admin_params, database_url
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine, normalise_url
from rag_service.embed import load_embedder
from rag_service.integrations.langchain import UniversalRAGRetriever as LangChainRetriever
from rag_service.integrations.llama_index import UniversalRAGRetriever as LlamaIndexRetriever
from rag_service.service import UniversalRAGService

REPO = Path(__file__).resolve().parents[1]
DATABASE = "rag_bench_integrations"
COLLECTION = "bench"
BUDGET_MS = 1.0
QUERIES = [
    "How do I point the service at my own PostgreSQL server?",
    "Which environment variable selects the reranking model?",
    "hybrid search reciprocal rank fusion",
    "What does make test do on a fresh machine?",
    "How are documents chunked and what does a parent chunk contain?",
    "BM25 posting budget per query",
    "why are generic plans slow",
    "shared_buffers of the embedded server",
    "what happens when the reranker cannot be loaded",
    "token budget of the formatted context",
    "incremental reindex of unchanged documents",
    "HNSW ef_search and iterative scans",
]

Timed = Callable[[str], Awaitable[None]]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="hashing", help="embedding model (default: the model-free hashing one)")
    parser.add_argument("--context", default="agent", help="preset every variant uses")
    parser.add_argument("--steps", type=int, default=300, help="timed steps (one query through every variant)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--adapter-steps", type=int, default=3000, help="steps of the adapter-only timing")
    parser.add_argument("--mcp", action=argparse.BooleanOptionalAction, default=True, help="time rag mcp too")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=REPO / "bench_out" / "integrations.json")
    parser.add_argument("--markdown", type=Path, default=REPO / "docs" / "benchmarks.md")
    return parser.parse_args(argv)


def bench_database(settings: Settings) -> str:
    """An empty, migrated ``rag_bench_integrations`` on the configured or embedded server; its URL."""
    if settings.database_url:
        server = normalise_url(settings.database_url)
    else:
        server = start_embedded_server(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)
    with psycopg.connect(**admin_params(server, database="postgres")) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    url = database_url(server, DATABASE)
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    engine.dispose()
    return url


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def mcp_caller(url: str, args: argparse.Namespace, stack: Any) -> Timed:
    """A ``search_knowledge`` call to a ``rag mcp`` subprocess on the same database."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ, RAG_DATABASE_URL=url, RAG_EMBEDDING_MODEL=args.model, RAG_RERANK_MODEL="none")
    params = StdioServerParameters(command=sys.executable, args=["-m", "rag_service.cli", "mcp"], env=env)
    client = await stack.enter_async_context(Client(params, read_timeout_seconds=120))

    async def call(query: str) -> None:
        result = await client.call_tool(
            "search_knowledge", {"query": query, "context": args.context, "collection": COLLECTION}
        )
        if result.is_error:
            raise RuntimeError(f"search_knowledge failed: {result.content}")

    return call


class ReplayService(UniversalRAGService):
    """``retrieve()`` answers a call it has already run from memory; everything else is the real service."""

    replayed: dict[str, Any]

    def retrieve(self, query: str, context: str = "chatbot", **kwargs: Any) -> Any:
        key = json.dumps([query, context, kwargs], sort_keys=True, default=str)
        replayed = self.__dict__.setdefault("replayed", {})
        if key not in replayed:
            replayed[key] = super().retrieve(query, context, **kwargs)
        return replayed[key]


async def measure(
    service: UniversalRAGService, url: str, args: argparse.Namespace, *, steps: int, mcp: bool
) -> dict[str, list[float]]:
    from contextlib import AsyncExitStack

    langchain = LangChainRetriever(service=service, context=args.context, collection=COLLECTION)
    llama = LlamaIndexRetriever(service, context=args.context, collection=COLLECTION)

    async def direct(q: str) -> None:
        service.retrieve(q, args.context, collection=COLLECTION)

    async def aretrieve(q: str) -> None:
        await service.aretrieve(q, args.context, collection=COLLECTION)

    async def lc_invoke(q: str) -> None:
        langchain.invoke(q)

    async def lc_ainvoke(q: str) -> None:
        await langchain.ainvoke(q)

    async def li_retrieve(q: str) -> None:
        llama.retrieve(q)

    async def li_aretrieve(q: str) -> None:
        await llama.aretrieve(q)

    variants: dict[str, Timed] = {
        "retrieve()": direct,
        "await aretrieve()": aretrieve,
        "LangChain invoke": lc_invoke,
        "LangChain ainvoke": lc_ainvoke,
        "LlamaIndex retrieve": li_retrieve,
        "LlamaIndex aretrieve": li_aretrieve,
    }
    async with AsyncExitStack() as stack:
        if mcp:
            variants["MCP search_knowledge (stdio round trip)"] = await mcp_caller(url, args, stack)
        rng = random.Random(args.seed)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for step in range(args.warmup + steps):
            query = QUERIES[step % len(QUERIES)]
            order = list(variants)
            rng.shuffle(order)
            for name in order:
                started = time.perf_counter()
                await variants[name](query)
                elapsed = (time.perf_counter() - started) * 1000.0
                if step >= args.warmup:
                    times[name].append(elapsed)
    return times


def summarise(times: dict[str, list[float]]) -> list[dict[str, Any]]:
    base = times["retrieve()"]
    rows = []
    for name, values in times.items():
        paired = [v - b for v, b in zip(values, base, strict=True)]
        rows.append(
            {
                "variant": name,
                "p50_ms": statistics.median(values),
                "p95_ms": percentile(values, 0.95),
                "p50_minus_direct_ms": statistics.median(values) - statistics.median(base),
                "median_paired_overhead_ms": statistics.median(paired),
                "in_process": "MCP" not in name,
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| variant | p50 ms | p95 ms | overhead ms (median of paired differences) | p50 - direct p50 ms | "
        "<= 1 ms |\n|---|---:|---:|---:|---:|---|\n"
    )
    lines = []
    for row in rows:
        overhead = row["median_paired_overhead_ms"]
        verdict = "-" if row["variant"] == "retrieve()" else ("yes" if overhead <= BUDGET_MS else "**no**")
        if not row["in_process"]:
            verdict += " (not an in-process adapter)"
        lines.append(
            f"| {row['variant']} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | {overhead:+.3f} | "
            f"{row['p50_minus_direct_ms']:+.3f} | {verdict} |"
        )
    return head + "\n".join(lines)


def markdown(results: dict[str, Any]) -> str:
    return (
        f"_Generated by `scripts/bench_integrations.py` on {results['finished']}: preset `{results['context']}`, "
        f"embedder `{results['model']}`, no reranker, {results['chunks']} chunks (docs/ and README.md); "
        f"{results['machine']}; load average {results['load_average']} at the start, "
        f"{results['load_average_end']} at the end._\n\n"
        f"**Adapters alone** ({results['adapter_steps']} steps over `ReplayService`: `retrieve()` answers "
        "from memory, so a variant's time is what it adds):\n\n"
        + table(results["adapter_rows"])
        + f"\n\n**End to end** ({results['steps']} steps after {results['warmup']} warm-up steps, the real "
        "search each time; differences here include the search's own noise):\n\n"
        + table(results["rows"])
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = load_settings(rerank_model="none", embedding_model=args.model)
    url = bench_database(settings)
    started = datetime.now(UTC)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    engine = make_engine(url, settings)
    service = UniversalRAGService(
        settings, database=Database(engine), embedder=load_embedder(args.model), reranker=None
    )
    try:
        report = service.index_paths([REPO / "docs", REPO / "README.md"], collection=COLLECTION)
        if not report.ok:
            print("\n".join(report.lines()), file=sys.stderr)
            return 1
        chunks = sum(info.chunks for info in service.collections())
        times = asyncio.run(measure(service, url, args, steps=args.steps, mcp=args.mcp))
    finally:
        service.close()
    replay = ReplayService(settings, database=Database(engine), embedder=load_embedder(args.model), reranker=None)
    try:
        adapter_times = asyncio.run(measure(replay, url, args, steps=args.adapter_steps, mcp=False))
    finally:
        replay.close()
    results = {
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "steps": args.steps,
        "warmup": args.warmup,
        "context": args.context,
        "model": args.model,
        "chunks": chunks,
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": load,
        "load_average_end": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "adapter_steps": args.adapter_steps,
        "adapter_rows": summarise(adapter_times),
        "rows": summarise(times),
        "samples_ms": {"end_to_end": times, "adapters_alone": adapter_times},
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    replace_section(args.markdown, "integrations", markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
