#!/usr/bin/env python3
"""Code search on a real package's own source: does the ``code`` strategy find functions better than ``recursive``?

Corpus: the installed source of one or more pure-Python packages (default: jinja2 and click, both
dependencies already in the venv), with the docstring of every function and method removed (a
function whose body was only its docstring gets ``...``). Queries: the first line of each removed
docstring (at least four words; summaries shared by two functions are dropped). Target: that function
in the stripped source.

Both strategies index the same stripped files into their own collection (real embedding model),
and each query is answered by ``retrieve()`` (hybrid vector + BM25, no reranker, no parent
expansion, no diversity, 10 chunks). A retrieved chunk stands for the function it shares the most
characters with; the rank of the target is its first appearance among the distinct functions so
named. MRR@10 and Recall@1/10 are printed, with ingestion time split into chunking and embedding.

    python scripts/code_search_eval.py [--package jinja2 --package click] [--json]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rag_service.config import load_settings
from rag_service.service import build_service


@dataclass(frozen=True)
class Function:
    source: str
    name: str
    start: int
    end: int


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(i + 1 for i, ch in enumerate(text) if ch == "\n")
    return starts


def strip_docstrings(text: str) -> tuple[str, dict[str, str]]:
    """``text`` without function docstrings, and each function's docstring summary by qualified name."""
    tree = ast.parse(text)
    lines = text.split("\n")
    summaries: dict[str, str] = {}
    removals: list[tuple[int, int, str | None]] = []  # 0-based first line, last line, replacement

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                doc = ast.get_docstring(child)
                first = child.body[0]
                if doc and isinstance(first, ast.Expr) and first.end_lineno is not None:
                    summaries.setdefault(name, doc.strip().split("\n")[0].strip())
                    indent = lines[first.lineno - 1][: first.col_offset]
                    only = len(child.body) == 1
                    removals.append((first.lineno - 1, first.end_lineno - 1, f"{indent}..." if only else None))
                visit(child, f"{name}.")

    visit(tree, "")
    for first, last, replacement in sorted(removals, reverse=True):
        lines[first : last + 1] = [replacement] if replacement is not None else []
    return "\n".join(lines), summaries


def functions_in(source: str, text: str) -> dict[str, Function]:
    tree = ast.parse(text)
    starts = _line_starts(text)
    found: dict[str, Function] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end_line = child.end_lineno or child.lineno
                end = starts[end_line] if end_line < len(starts) else len(text)
                found.setdefault(name, Function(source, name, starts[first - 1], end))
                visit(child, f"{name}.")

    visit(tree, "")
    return found


def build_corpus(packages: list[str]) -> tuple[list[tuple[str, str, str]], list[tuple[str, Function]]]:
    """``(source, title, text)`` items and ``(query, target)`` pairs."""
    items: list[tuple[str, str, str]] = []
    pairs: list[tuple[str, Function]] = []
    for package in packages:
        root = Path(importlib.import_module(package).__file__ or "").parent
        for path in sorted(root.rglob("*.py")):
            source = f"{package}/{path.relative_to(root).as_posix()}"
            stripped, summaries = strip_docstrings(path.read_text(encoding="utf-8"))
            items.append((source, path.stem, stripped))
            functions = functions_in(source, stripped)
            pairs += [(q, functions[n]) for n, q in summaries.items() if n in functions and len(q.split()) >= 4]
    counts: dict[str, int] = {}
    for query, _ in pairs:
        counts[query] = counts.get(query, 0) + 1
    return items, [(q, f) for q, f in pairs if counts[q] == 1]


def attribute(functions: list[Function], start: int, end: int) -> Function | None:
    """The function sharing the most characters with ``[start, end)`` (the shorter one on ties)."""
    best: tuple[int, int] | None = None
    chosen: Function | None = None
    for function in functions:
        shared = min(end, function.end) - max(start, function.start)
        if shared > 0:
            key = (shared, -(function.end - function.start))
            if best is None or key > best:
                best, chosen = key, function
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", action="append", default=None, help="package to search (repeatable)")
    parser.add_argument("--strategies", default="code,recursive")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    packages = args.package or ["jinja2", "click"]
    items, pairs = build_corpus(packages)
    by_source: dict[str, list[Function]] = {}
    for source, _, text in items:
        by_source[source] = list(functions_in(source, text).values())
    print(f"corpus: {len(items)} files, {sum(len(t) for _, _, t in items):,} characters; {len(pairs)} queries",
          file=sys.stderr)  # fmt: skip
    service = build_service(load_settings())
    results: dict[str, dict[str, float]] = {}
    try:
        for strategy in args.strategies.split(","):
            collection = f"codeeval-{strategy}"
            report = service.index_texts(items, collection=collection, strategy=strategy, force=True, progress=True)
            reciprocal, hits1, hits10 = 0.0, 0, 0
            started = time.perf_counter()
            for query, target in pairs:
                result = service.retrieve(
                    query, context="search", collection=collection, max_chunks=10, rerank_enabled=False,
                    return_parents=False, diversity=0.0, expand_query=False,
                )  # fmt: skip
                ranked: list[Function] = []
                for chunk in result.chunks:
                    function = attribute(by_source.get(chunk.source, []), chunk.start_char, chunk.end_char)
                    if function is not None and function not in ranked:
                        ranked.append(function)
                if target in ranked[:10]:
                    rank = ranked.index(target) + 1
                    reciprocal += 1 / rank
                    hits1 += rank == 1
                    hits10 += 1
            n = len(pairs)
            results[strategy] = {
                "mrr@10": round(reciprocal / n, 4),
                "recall@1": round(hits1 / n, 4),
                "recall@10": round(hits10 / n, 4),
                "chunks": report.chunks_written,
                "ingest_s": round(report.seconds, 1),
                "chunking_s": round(report.chunking_seconds, 2),
                "embedding_s": round(report.embedding_seconds, 1),
                "chunking_share": round(report.chunking_seconds / report.seconds, 4),
                "query_s": round(time.perf_counter() - started, 1),
            }
            print(strategy, json.dumps(results[strategy]), file=sys.stderr)
    finally:
        service.close()
    summary = {"packages": packages, "files": len(items), "queries": len(pairs), "results": results}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{'strategy':<12}{'MRR@10':>8}{'R@1':>8}{'R@10':>8}{'chunks':>8}{'ingest s':>10}{'chunking':>10}")
        for name, r in results.items():
            print(f"{name:<12}{r['mrr@10']:>8.3f}{r['recall@1']:>8.3f}{r['recall@10']:>8.3f}{r['chunks']:>8}"
                  f"{r['ingest_s']:>10.1f}{r['chunking_share']:>10.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
