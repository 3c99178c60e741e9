#!/usr/bin/env python
"""The package's structure in numbers (docs/architecture.md, "Structure"): units, import layers, cycles, sizes.

A unit is a subpackage of ``rag_service`` (``db``, ``ingest``, ...) or a top-level module; an edge is an
import of one unit by another, read from the source (module level and inside functions, ``TYPE_CHECKING``
included). Layers: the longest chain of edges, counted in units; an edge that closes a cycle is reported.
With ``--trace DOCS``, the modules one ingest of DOCS and one query pass through (every function called,
in a fresh embedded database under ``RAG_DATA_DIR``).

    .venv/bin/python scripts/structure.py [--root PATH] [--trace docs/]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def unit_of(module: str) -> str:
    """``rag_service.db.search`` -> ``db``; ``rag_service.service`` -> ``service``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path, module: str) -> set[str]:
    """The ``rag_service`` modules that the file at ``path`` (module ``module``) imports, anywhere in it."""
    found: set[str] = set()
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rag_service"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.startswith("rag_service"):
                found.add(base)
    return found


def measure(root: Path) -> dict[str, Any]:
    """Units, edges, layers, cycles and the longest product modules of the checkout at ``root``."""
    files = sorted(p for p in (root / "rag_service").rglob("*.py") if "migrations" not in p.parts)
    edges: set[tuple[str, str]] = set()
    for path in files:
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for target in imports(path, module):
            a, b = unit_of(module), unit_of(target)
            if a != b and b != "__init__":
                edges.add((a, b))
    units = sorted({unit_of(".".join(p.relative_to(root).with_suffix("").parts)) for p in files})
    graph = {u: sorted(b for a, b in edges if a == u) for u in units}
    depth: dict[str, int] = {}
    cycles: list[str] = []

    def layer(u: str, path: tuple[str, ...]) -> int:
        if u in path:
            cycles.append(" -> ".join((*path[path.index(u) :], u)))
            return 0
        if u not in depth:
            depth[u] = 1 + max((layer(v, (*path, u)) for v in graph[u]), default=0)
        return depth[u]

    layers = max(layer(u, ()) for u in units)
    sizes = sorted(
        ((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(root))) for p in files), reverse=True
    )
    return {
        "modules": len(files),
        "units": len(units),
        "edges": len(edges),
        "layers": layers,
        "cycles": sorted(set(cycles)),
        "longest": [f"{name} {lines}" for lines, name in sizes[:3]],
        "over_450_lines": [name for lines, name in sizes if lines > 450],
    }


def trace(docs: Path) -> dict[str, Any]:
    """The ``rag_service`` modules one ingest of ``docs`` and one query call into (after a first, warm-up run)."""
    from rag_service.service import build_service

    def modules(call: Callable[[], object]) -> list[str]:
        seen: set[str] = set()

        def profile(frame: Any, event: str, arg: object) -> None:
            name = frame.f_code.co_filename
            if event == "call" and "/rag_service/" in name and "/site-packages/" not in name:
                seen.add(name.split("/rag_service/", 1)[1])

        sys.setprofile(profile)
        try:
            call()
        finally:
            sys.setprofile(None)
        return sorted(seen)

    service = build_service()
    service.index_paths([str(docs)], collection="structure-warm")  # imports and model loads happen here
    ingest = modules(lambda: service.index_paths([str(docs)], collection="structure"))
    service.retrieve("how are documents chunked", "chatbot", collection="structure")
    query = modules(lambda: service.retrieve("how does a query run", "chatbot", collection="structure"))
    service.close()
    return {"ingest_modules": len(ingest), "query_modules": len(query), "ingest": ingest, "query": query}


def main() -> int:
    """Print the structure of ``--root`` (and, with ``--trace``, the modules an ingest and a query use) as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--trace", type=Path, metavar="DOCS")
    args = parser.parse_args()
    result = measure(args.root)
    if args.trace:
        result |= trace(args.trace)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
