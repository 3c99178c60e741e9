"""``rag graph build [--collection C]``: give collections indexed before the chunk graph their edges.

Nothing is re-embedded: similarity edges come from the stored vectors through the HNSW index, structure
edges from the stored chunks, link edges from the stored document texts.
"""

from __future__ import annotations

import argparse
import json

from rag_service.config import Settings


def _build(args: argparse.Namespace, settings: Settings) -> int:
    from rag_service.service import build_service

    service = build_service(settings)
    try:
        report = service.build_graph(collection=args.collection)
    finally:
        service.close()
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print("\n".join(report.lines()))
    return 0


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rag graph`` to the ``rag`` parser."""
    graph = commands.add_parser("graph", help="the chunk graph used by graph retrieval (graph_weight)")
    graph_commands = graph.add_subparsers(dest="graph_command", required=True)
    build = graph_commands.add_parser(
        "build", help="rebuild the edges of a collection (or of all) from stored chunks, without re-embedding"
    )
    build.add_argument("--collection", metavar="NAME", default=None, help="one collection (default: every collection)")
    build.add_argument("--json", action="store_true", help="the report as JSON")
    build.set_defaults(handler=_build)
