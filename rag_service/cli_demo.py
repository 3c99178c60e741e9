"""``rag demo``: index the README and the user docs of the checkout, then query every preset."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rag_service.cli_commands import answer_text, open_service
from rag_service.config import Settings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rag_service.result import RAGResult

DEMO_QUERIES = {
    "chatbot": "How do I point the service at my own PostgreSQL server?",
    "agent": "What does RAG_EXACT_SEARCH_BELOW control?",
    "search": "hybrid search reciprocal rank fusion",
    "workflow": "What does make test do on a fresh machine?",
    "context_engineering": "How are documents chunked and what does a parent chunk contain?",
}
#: a question the docs cannot answer, asked of the ``agent`` preset last: its relevance floor says so instead of
#: padding the context. (Without a cross-encoder that floor also turned away the demo's earlier agent question,
#: "Which environment variable selects the reranking model?": the bundled model scores its table row 39%, and
#: the row is the first result only with ``RAG_TABLE_ROWS``, docs/benchmarks.md "Session 41" and "Session 48".)
OFF_TOPIC = ("agent", "What is the boiling point of ethanol?")


#: the engineering journal and the measurement log: 85% of docs/ by size, and they quote the demo's own questions
#: (a benchmark section that timed `rag query 'Which environment variable selects the reranking model?'` was the
#: agent preset's answer to that question)
_NOT_USER_DOCS = frozenset({"notes.md", "benchmarks.md"})


def _checkout_corpus() -> list[Path]:
    """README.md and the user documentation under docs/ of the checkout the package runs from (none for an
    installed wheel)."""
    root = Path(__file__).resolve().parents[1]
    docs = sorted(p for p in (root / "docs").glob("*.md") if p.name not in _NOT_USER_DOCS)
    return [p for p in (root / "README.md", *docs) if p.exists()]


def _packaged_readme() -> str:
    """The README as installed with the package (its metadata's long description)."""
    from importlib.metadata import PackageNotFoundError, metadata

    from rag_service.errors import ConfigurationError

    try:
        info = metadata("rag_service")
    except PackageNotFoundError:
        info = None
    text = (info.get_payload() or info.get("Description") or "") if info is not None else ""  # type: ignore[attr-defined]
    if not str(text).strip():
        raise ConfigurationError(
            "the demo corpus is missing: no docs/ next to the package and no packaged README; "
            "reinstall rag_service or run `rag demo` from a checkout"
        )
    return str(text)


def _index_demo_corpus(service, collection: str):  # type: ignore[no-untyped-def]
    corpus = _checkout_corpus()
    if corpus:
        print(f"indexing {', '.join(str(p) for p in corpus)} into collection {collection!r}")
        return service.index_paths(corpus, collection=collection, progress=True)
    print(f"indexing the packaged README into collection {collection!r}")
    item = ("rag_service/README.md", "rag_service", _packaged_readme())
    return service.index_texts([item], collection=collection, strategy="markdown", progress=True)


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    service = open_service(settings)
    try:
        report = _index_demo_corpus(service, args.collection)
        print("\n".join(report.lines()))
        print(f"\n{'context':<20} {'chunks':>6} {'tokens':>6} {'total ms':>9} {'embed':>7} {'sql':>7} {'rerank':>7}")
        results = []
        contexts = service.contexts()
        asked = [(context, DEMO_QUERIES.get(context, "What is rag_service?")) for context in contexts]
        asked += [OFF_TOPIC] if OFF_TOPIC[0] in contexts else []
        for context, query in asked:
            result = service.retrieve(query, context=context, collection=args.collection)
            results.append(result)
            m = result.metrics
            print(
                f"{context:<20} {len(result.chunks):>6} {result.total_tokens:>6} {m.total_time_ms:>9.1f} "
                f"{m.embedding_time_ms:>7.1f} {m.retrieval_time_ms:>7.1f} {m.rerank_time_ms:>7.1f}"
            )
        print("\n".join(answer_lines(results)))
    finally:
        service.close()
    return 0


def answer_lines(results: Sequence[RAGResult]) -> list[str]:
    """Each preset's question and its first result (or what it answered instead); a degraded stage's line once,
    where it first appears (an unreachable reranker's line had followed every preset's answer)."""
    lines: list[str] = []
    shown: set[str] = set()
    for result in results:
        lines += ["", f"=== {result.context_type}: {result.query}"]
        top = result.chunks[0] if result.chunks else None
        if top is not None:
            lines.append(f"top: {top.source} § {top.header_path or '-'} (relevance {top.relevance_score:.0%})")
            lines.append("    " + " ".join(top.content.split())[:300])
        else:  # what the preset answered: its relevance floor's line, or why the context is empty
            lines.append(answer_text(result))
        new = [reason for reason in dict.fromkeys(result.metrics.degraded) if reason not in shown]
        lines += [f"degraded: {reason}" for reason in new]
        shown.update(new)
    return lines


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rag demo`` to the ``rag`` parser."""
    demo = commands.add_parser("demo", help="index the bundled docs and query every preset")
    demo.add_argument(
        "--collection", metavar="NAME", default="demo", help="collection to index into and query (default %(default)s)"
    )
    demo.set_defaults(handler=_demo)
