"""Subcommands beyond ``rag db``: reindex, query, eval, demo."""

from __future__ import annotations

import argparse
import json
import sys

from rag_service.config import Settings


def _service(settings: Settings):  # type: ignore[no-untyped-def]
    from rag_service.service import build_service

    return build_service(settings)


def _reindex(args: argparse.Namespace, settings: Settings) -> int:
    if not args.all and not args.paths:
        print("error: give PATH... to index, or --all to re-chunk every stored document", file=sys.stderr)
        return 2
    service = _service(settings)
    try:
        if args.all:
            report = service.reindex_all(collection=args.collection_given, progress=not args.quiet)
        else:
            report = service.index_paths(
                args.paths,
                collection=args.collection_given or "default",
                strategy=args.strategy,
                prune=args.prune,
                force=args.force,
                progress=not args.quiet,
            )
    finally:
        service.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _query(args: argparse.Namespace, settings: Settings) -> int:
    service = _service(settings)
    overrides = {"max_chunks": args.max_chunks} if args.max_chunks is not None else {}
    try:
        result = service.retrieve(args.text, context=args.context, collection=args.collection, **overrides)
    finally:
        service.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return 0
    print(result.formatted_context or "(no matching chunks)")
    m = result.metrics
    print(
        f"\n-- {len(result.chunks)} chunks, {result.total_tokens} tokens, {m.total_time_ms:.1f} ms "
        f"(embed {m.embedding_time_ms:.1f}, sql {m.retrieval_time_ms:.1f}, rerank {m.rerank_time_ms:.1f}); "
        f"reranker: {m.reranker}",
        file=sys.stderr,
    )
    for reason in m.degraded:
        print(f"-- degraded: {reason}", file=sys.stderr)
    return 0


def add_reindex_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """``rag reindex`` (also used by ``scripts/reindex.py``)."""
    parser = commands.add_parser("reindex", help="index files and folders (incremental)")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to index")
    parser.add_argument("--collection", dest="collection_given", default=None, help="collection (default 'default')")
    parser.add_argument("--strategy", choices=["markdown", "recursive", "sentence", "token"], default=None)
    parser.add_argument("--prune", action="store_true", help="delete documents whose files are gone")
    parser.add_argument("--force", action="store_true", help="re-chunk and re-embed unchanged documents too")
    parser.add_argument("--all", action="store_true", help="re-chunk and re-embed every stored document")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=_reindex)
    return parser


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this module's subcommands to the ``rag`` parser."""
    add_reindex_parser(commands)

    query = commands.add_parser("query", help="retrieve context for a question")
    query.add_argument("text", help="the question")
    query.add_argument("--context", default="chatbot", help="preset name (rag_configurations row)")
    query.add_argument("--collection", default="default")
    query.add_argument("--max-chunks", type=int, default=None)
    query.add_argument("--json", action="store_true", help="the whole result as JSON")
    query.set_defaults(handler=_query)
