"""``rag eval DATASET_DIR``: index a BEIR or markdown-documentation set, run its queries, print the measures.

Everything that can be checked without the service is checked before the minutes (or hours) of indexing and
querying: the options on the stored preset, the dataset's files and records, and a ``--run-out`` file's path and
ids (a TREC run cannot hold an id with whitespace).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rag_service import IngestReport
from rag_service.cli_commands import check_given_once, open_service, parse_sets
from rag_service.config import Settings

if TYPE_CHECKING:
    from rag_service.evaluation.runner import EvalConfig, EvalResult
    from rag_service.service import UniversalRAGService


def _eval_sets(args: argparse.Namespace) -> dict[str, object]:
    """``--set``'s overrides; ConfigurationError for a knob an option also gives (``--set`` silently won)."""
    sets = parse_sets(args.set)
    options: dict[str, str | None] = {
        "candidate_k": None if args.depth is None else f"--depth {args.depth}",
        "rerank_enabled": "--no-rerank" if args.no_rerank else None,
    }
    if args.retriever != "hybrid":  # the arm's weights
        options.update(dict.fromkeys(("vector_weight", "keyword_weight"), f"--retriever {args.retriever}"))
    check_given_once(sets, args.set, options)
    return sets


def evaluate_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``rag eval``; the exit status."""
    from rag_service.evaluation.docset import is_docset
    from rag_service.evaluation.runner import EvalConfig
    from rag_service.evaluation.trec import check_run_file, write_trec_run

    if args.run_out:
        check_run_file(Path(args.run_out))
    dataset_dir = Path(args.dataset_dir)
    docs = is_docset(dataset_dir)
    config = EvalConfig(
        context=args.context,
        retriever=args.retriever,
        rerank=not args.no_rerank,
        depth=args.depth if args.depth is not None or docs else 300,
        strategy=None if docs else "recursive",
        overrides=_eval_sets(args),
    )
    config.retrieval_overrides()  # --retriever, --depth: before the dataset is read
    run_eval = _eval_docset if docs else _eval_beir
    result = run_eval(dataset_dir, args, config, settings)
    if result is None:
        return 1
    if args.run_out:
        write_trec_run(result.run, Path(args.run_out), tag=f"rag-{config.retriever}")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=False))
    else:
        print("\n".join(result.lines()))
    return 0


def _eval_beir(
    dataset_dir: Path, args: argparse.Namespace, config: EvalConfig, settings: Settings
) -> EvalResult | None:
    from rag_service.evaluation.beir import load_beir
    from rag_service.evaluation.runner import collection_for, ensure_indexed, run_queries

    dataset = load_beir(dataset_dir, split=args.split)
    _check_run_ids(args, dataset_dir, dataset.queries, ("document id", dataset.corpus, dataset_dir / "corpus.jsonl"))
    return _index_and_run(
        settings,
        args,
        config,
        args.collection or collection_for(dataset_dir),
        index=lambda service, collection, progress: ensure_indexed(
            service, dataset, collection=collection, strategy=config.strategy or "recursive", progress=progress
        ),
        run=lambda service, collection, progress: run_queries(
            service, dataset, config, collection=collection, name=dataset_dir.resolve().name, progress=progress
        ),
    )


def _eval_docset(
    dataset_dir: Path, args: argparse.Namespace, config: EvalConfig, settings: Settings
) -> EvalResult | None:
    from rag_service.evaluation.docrun import docset_collection, index_docset, run_docset
    from rag_service.evaluation.docset import load_docset

    docset = load_docset(dataset_dir, split=args.split, max_bytes=settings.max_file_bytes)
    _check_run_ids(args, dataset_dir, docset.queries, ("file", docset.files, docset.docs_dir))  # ids are file#N
    return _index_and_run(
        settings,
        args,
        config,
        args.collection or docset_collection(dataset_dir),
        index=lambda service, collection, progress: index_docset(
            service, docset, collection=collection, strategy=config.strategy, progress=progress
        ),
        run=lambda service, collection, progress: run_docset(
            service, docset, config, collection=collection, name=dataset_dir.resolve().name, progress=progress
        ),
    )


def _check_run_ids(
    args: argparse.Namespace, dataset_dir: Path, queries: Iterable[str], documents: tuple[str, Iterable[str], Path]
) -> None:
    """With ``--run-out``: the query ids and the ``documents`` ids (what they are, the ids, their file) a run
    names, each one a TREC run can hold, checked before any work."""
    if args.run_out:
        from rag_service.evaluation.trec import check_run_ids

        check_run_ids(queries, what="query id", source=dataset_dir / "queries.jsonl")
        what, ids, source = documents
        check_run_ids(ids, what=what, source=source)


def _index_and_run(
    settings: Settings,
    args: argparse.Namespace,
    config: EvalConfig,
    collection: str,
    *,
    index: Callable[[UniversalRAGService, str, bool], IngestReport],
    run: Callable[[UniversalRAGService, str, bool], EvalResult],
) -> EvalResult | None:
    """Check the whole configuration, index the dataset (a failed document ends the run: None), run its queries."""
    service = open_service(settings)
    progress = not args.quiet
    try:
        # --context, --set, --depth and --no-rerank on the stored preset, as every query will apply them:
        # a mistake fails here, before minutes of indexing
        service.preset(config.context, **config.retrieval_overrides())
        report = index(service, collection, progress)
        if not report.ok:
            print("\n".join(report.lines()), file=sys.stderr)
            return None
        result = run(service, collection, progress)
    finally:
        service.close()
    result.ingest = report.to_dict()
    return result
