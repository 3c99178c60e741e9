"""``rag metadata build [--collection C] [--json]``: summaries and keywords for stored documents.

Nothing is re-embedded: see ``rag_service.ingest.backfill``.
"""

from __future__ import annotations

import argparse
import json

from rag_service.config import Settings


def _build(args: argparse.Namespace, settings: Settings) -> int:
    from rag_service.service import build_service

    service = build_service(settings)
    try:
        report = service.build_metadata(collection=args.collection)
    finally:
        service.close()
    print(json.dumps(report.to_dict(), indent=2) if args.json else "\n".join(report.lines()))
    return 0


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rag metadata`` to the ``rag`` parser."""
    metadata = commands.add_parser("metadata", help="chunk keywords and document summaries")
    metadata_commands = metadata.add_subparsers(dest="metadata_command", required=True)
    build = metadata_commands.add_parser(
        "build", help="recompute summaries and keywords of stored documents (no re-embedding)"
    )
    build.add_argument("--collection", metavar="NAME", default=None, help="one collection (default: every collection)")
    build.add_argument("--json", action="store_true", help="the report as JSON")
    build.set_defaults(handler=_build)
