"""``rag presets [NAME] [--set KEY=VALUE ...] [--json]``: the stored presets, one of them, or a change to one.

The presets are rows of ``rag_configurations``; the HTTP API has ``GET|PUT /api/presets[/{context}]`` and the
Python API ``presets()`` / ``update_preset()``. This is the same from a shell: a change is validated as a per-call
override is, and every later call of any process follows it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, fields
from typing import TYPE_CHECKING, Any

from rag_service.cli_commands import open_service, parse_sets, set_item
from rag_service.config import Preset, Settings

if TYPE_CHECKING:
    from collections.abc import Sequence

#: the table's columns: (heading, knob)
_COLUMNS = (
    ("preset", "context_type"),
    ("chunks", "max_chunks"),
    ("tokens", "max_tokens"),
    ("parents", "return_parents"),
    ("expand", "expand_query"),
    ("mmr", "diversity"),
    ("fusion", "fusion_method"),
    ("vector", "vector_weight"),
    ("keyword", "keyword_weight"),
    ("rerank", "rerank_enabled"),
    ("min_rel", "min_relevance"),
)


def _presets(args: argparse.Namespace, settings: Settings) -> int:
    from rag_service.errors import ConfigurationError

    if args.set and args.name is None:
        raise ConfigurationError("--set changes one preset: name it first, e.g. rag presets agent --set max_chunks=6")
    changes = parse_sets(args.set)  # before the database opens: a mistyped --set costs nothing
    service = open_service(settings)
    try:
        if args.set:
            shown = [service.update_preset(args.name, **changes)]
        elif args.name is not None:
            shown = [service.preset(args.name)]
        else:
            shown = service.presets()
    finally:
        service.close()
    if args.json:
        rows = [asdict(preset) for preset in shown]
        print(json.dumps(rows if args.name is None else rows[0], indent=2))
    else:
        print("\n".join(table_lines(shown) if args.name is None else knob_lines(shown[0])))
    return 0


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:g}" if isinstance(value, float) else str(value)


def table_lines(presets: Sequence[Preset]) -> list[str]:
    """One line per preset under a heading, the knobs people change most (``rag presets NAME`` shows all)."""
    rows = [[heading for heading, _ in _COLUMNS]]
    rows += [[_cell(getattr(preset, knob)) for _, knob in _COLUMNS] for preset in presets]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def knob_lines(preset: Preset) -> list[str]:
    """Every knob of ``preset``, ``name: value`` (its name first)."""
    return [f"{spec.name}: {_cell(getattr(preset, spec.name))}" for spec in fields(preset)]


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rag presets`` to the ``rag`` parser."""
    presets = commands.add_parser(
        "presets",
        help="list the presets (rag_configurations), show one, or change one",
        description="Without NAME: every preset, a line each. With NAME: all its knobs; with --set, change them "
        "(validated as per-call overrides are; every later call follows).",
    )
    presets.add_argument("name", nargs="?", metavar="NAME", help="one preset, e.g. agent")
    presets.add_argument(
        "--set",
        action="append",
        default=[],
        type=set_item,
        metavar="KEY=VALUE",
        help="change a knob of NAME, e.g. --set max_chunks=6 --set min_relevance=0.4",
    )
    presets.add_argument("--json", action="store_true", help="as JSON (the HTTP API's fields)")
    presets.set_defaults(handler=_presets)
