"""Subcommands beyond ``rag db``: reindex, query, eval."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rag_service import IngestReport, list_strategies
from rag_service.config import Settings
from rag_service.db import admin
from rag_service.errors import ConfigurationError
from rag_service.knobs import PRESET_KNOBS, SHOWN_VALUE_CHARS, shown_value
from rag_service.service_paths import check_root, only_unsupported_files
from rag_service.shutdown import Interrupted, deferred_stop, exit_status
from rag_service.terminal import visible_controls

if TYPE_CHECKING:
    from rag_service.embed import Embedder
    from rag_service.result import RAGResult


def open_service(settings: Settings, embedder: Embedder | None = None, *, check_model: bool = True):  # type: ignore[no-untyped-def]
    """The service a command runs on (imported when a command needs it: ``rag --help`` loads none of it)."""
    from rag_service.service import build_service

    return build_service(settings, embedder=embedder, check_model=check_model)


def _start_query_parts(settings: Settings, started: list[threading.Thread]) -> Embedder:
    """The embedder of ``settings``; its model, the token encoding and the embedded database start in threads
    (each added to ``started``, also when a stop signal comes meanwhile: the caller joins them).

    A cold ``rag query`` then loads them while the main thread imports SQLAlchemy, not after (ONNX
    session ~0.25 s, BPE table ~0.15 s, server start ~0.15 s, mostly waiting on ``pg_ctl``). A failure
    is left to the main thread's own call, which reports it as before.
    """
    from rag_service.embed import LazyEmbedder, embedder_for
    from rag_service.tokens import preload_encoding

    embedder = embedder_for(
        settings.embedding_model,
        batch_size=settings.embedding_batch_size,
        backend=settings.embedding_backend,
        cache_dir=settings.data_dir / "models",
    )

    def load_model() -> None:
        with contextlib.suppress(Exception):
            if isinstance(embedder, LazyEmbedder):
                embedder.model()

    def load_encoding() -> None:
        with contextlib.suppress(Exception):
            preload_encoding()

    def start_database() -> None:
        with contextlib.suppress(Exception):
            admin.start_embedded_server(settings)

    threads = [
        threading.Thread(target=load_model, name="rag-query-model", daemon=True),
        threading.Thread(target=load_encoding, name="rag-query-encoding", daemon=True),
    ]
    if settings.database_url is None:
        threads.append(threading.Thread(target=start_database, name="rag-query-database", daemon=True))
    with deferred_stop():
        for thread in threads:
            thread.start()
            started.append(thread)
    return embedder


#: how long a command leaving early (an error, a stop signal) waits for the threads of ``_start_query_parts``
_STOPPED_WAIT_S = 10.0


def _wait_for(threads: list[threading.Thread], *, bound: float | None) -> None:
    """Join ``threads``: an early exit comes after they are done, never inside a server's start. Leaving on an
    error or a stop, at most ``bound`` seconds in all (daemon threads; a stop must end the command), after ending
    a first model export (it held the exit ~10 s, then was thrown away anyway)."""
    if bound is not None:
        from rag_service.embed import stop_model_exports

        stop_model_exports(for_good=True)
    deadline = None if bound is None else time.monotonic() + bound
    for thread in threads:
        thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))


#: options of ``rag reindex PATH...`` that ``--all`` (re-chunk what is stored) has no use for
_PATH_OPTIONS = {"paths": "PATH", "strategy": "--strategy", "prune": "--prune", "force": "--force", "root": "--root"}


def _reindex(args: argparse.Namespace, settings: Settings) -> int:
    if not args.all and not args.paths:
        print("error: give PATH... to index, or --all to re-chunk every stored document", file=sys.stderr)
        return 2
    given = [flag for name, flag in _PATH_OPTIONS.items() if getattr(args, name) not in (None, False, [])]
    if args.all and given:
        print(
            f"error: --all re-chunks and re-embeds the stored documents from their stored text and takes none of "
            f"{', '.join(given)}; drop them, or leave out --all to index PATH...",
            file=sys.stderr,
        )
        return 2
    if args.root is not None:
        try:
            check_root(args.root, args.paths)
        except ConfigurationError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    if (unsupported := only_unsupported_files(args.paths)) is not None:  # the run would index nothing
        print(f"error: {unsupported}", file=sys.stderr)
        return 2
    # with --prune a PATH that is gone is how its stored documents are removed; otherwise it is a typo
    missing = [] if args.all or args.prune else [p for p in args.paths if not Path(p).exists()]
    service = open_service(settings, check_model=not args.all)  # --all switches the stored model where it differs
    try:
        if args.all:
            report = service.reindex_all(collection=args.collection_given, progress=not args.quiet, switch_model=True)
        else:
            report = service.index_paths(
                args.paths,
                # an empty --collection "$UNSET" is refused by the service, not read as 'default'
                collection="default" if args.collection_given is None else args.collection_given,
                strategy=args.strategy,
                prune=args.prune,
                force=args.force,
                progress=not args.quiet,
                root=args.root,
            )
    except Interrupted as stop:
        if not isinstance(stop.partial, IngestReport):
            raise
        _print_report(stop.partial, as_json=args.json)
        name = signal.Signals(stop.signum).name
        print(
            f"{'interrupted' if stop.signum == signal.SIGINT else 'terminated'} by {name}: the documents counted "
            "above are written, every other one keeps its previous version; run the same command again to finish",
            file=sys.stderr,
        )
        return exit_status(stop)
    finally:
        service.close()
    _print_report(report, as_json=args.json)
    if missing:
        names = ", ".join(repr(p) for p in missing)
        print(
            f"error: {'PATHs' if len(missing) > 1 else 'PATH'} {names} "
            f"{'do' if len(missing) > 1 else 'does'} not exist (any other PATH was indexed); check the spelling, "
            "or add --prune to remove what was indexed from there",
            file=sys.stderr,
        )
        return 1
    return 0 if report.ok else 1


def _print_report(report: IngestReport, *, as_json: bool) -> None:
    text = json.dumps(report.to_dict(), indent=2) if as_json else visible_controls("\n".join(report.lines()))
    print(text, flush=True)


def _query(args: argparse.Namespace, settings: Settings) -> int:
    overrides = _query_overrides(args)  # before anything starts: a mistyped --set loads no model
    starting: list[threading.Thread] = []
    try:
        service = open_service(settings, _start_query_parts(settings, starting))
        try:
            result = service.retrieve(args.text, context=args.context, collection=args.collection, **overrides)
        finally:
            service.close()
    finally:
        _wait_for(starting, bound=None if sys.exc_info()[0] is None else _STOPPED_WAIT_S)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return 0
    m = result.metrics
    print(visible_controls(answer_text(result)))  # a document's escapes shown, not run by the terminal
    print(
        f"\n-- {len(result.chunks)} chunks, {result.total_tokens} tokens, {m.total_time_ms:.1f} ms "
        f"(embed {m.embedding_time_ms:.1f}, sql {m.retrieval_time_ms:.1f}, rerank {m.rerank_time_ms:.1f}"
        f"{f', llm {m.llm_time_ms:.1f}' if m.llm_time_ms else ''}); reranker: {m.reranker}",
        file=sys.stderr,
    )
    for reason in m.degraded:
        print(visible_controls(f"-- degraded: {reason}"), file=sys.stderr)
    return 0


#: ``rag query``'s own inputs that ``--set`` cannot give (``filters`` it can: retrieve() takes it as a keyword)
_QUERY_INPUTS = {
    "query": "give the question as the first argument",
    "context": "--context",
    "collection": "--collection",
}


#: ``rag query``'s options that give a knob, which ``--set`` can give too
_KNOB_OPTIONS = {"max_chunks": "--max-chunks", "graph_weight": "--graph-weight"}


def _query_overrides(args: argparse.Namespace) -> dict[str, object]:
    """Every per-call override of retrieve() (``--set``, ``--max-chunks``, ``--graph-weight``), checked by the
    service; ConfigurationError for a knob given by an option and by ``--set`` (one silently won)."""
    overrides = parse_sets(args.set)
    _check_query_sets(overrides)
    given = {name: getattr(args, name) for name in _KNOB_OPTIONS}
    typed = {name: None if value is None else f"{_KNOB_OPTIONS[name]} {value}" for name, value in given.items()}
    check_given_once(overrides, args.set, typed)
    overrides.update((name, value) for name, value in given.items() if value is not None)
    return overrides


def check_given_once(sets: dict[str, object], items: list[str], options: dict[str, str | None]) -> None:
    """ConfigurationError for a knob ``--set`` gives (``sets``, parsed from ``items``) that an option gives too
    (``options``: each knob's option as typed, None where it was not given): one of them silently won."""
    for knob, option in options.items():
        if option is not None and knob in sets:
            typed = next(item for item in reversed(items) if item.partition("=")[0] == knob)
            raise ConfigurationError(
                f"{knob} is given twice, by {option} and by --set {_shown_text(typed)}; give it once"
            )


def _check_query_sets(overrides: dict[str, object]) -> None:
    """One line for ``--set collection=...`` (and ``context``, ``query``): inputs of ``rag query``, not knobs."""
    for name, fix in _QUERY_INPUTS.items():
        if name in overrides:
            given = overrides[name]
            value = _shown_text(given) if isinstance(given, str) else shown_value(given)
            hint = fix if name == "query" else f"use {fix} {value}"
            raise ConfigurationError(f"--set {name}={value}: {name} is not a preset override; {hint}")


def answer_text(result: RAGResult) -> str:
    """The formatted context, or why it is empty: nothing matched, or the budget held no result (its degraded line)."""
    if result.formatted_context:
        return result.formatted_context
    return "(no result fits: see the degraded line)" if result.metrics.total_candidates else "(no matching chunks)"


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    from rag_service.cli_eval import evaluate_command

    return evaluate_command(args, settings)


def set_item(item: str) -> str:
    """``--set``'s argparse type: a ``key=value`` item, else a usage error (exit 2) naming it."""
    key, sep, _ = item.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{item!r} must look like key=value, e.g. --set max_chunks=6")
    return item


def parse_sets(items: list[str]) -> dict[str, object]:
    """``key=value`` overrides, each value read as JSON (numbers, true/false, objects), a bare word as text
    (``fusion_method=rrf``). ConfigurationError for a key given twice (the last silently won) and for text given
    to a number or switch knob, naming the JSON wanted ("True" read as text was "must be true or false")."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"--set {item!r} must look like key=value, e.g. --set keyword_scorer=ts_rank_cd")
        if key in out:
            earlier = next(given for given in items if given.partition("=")[0] == key)
            raise ConfigurationError(
                f"{key} is given twice, by --set {_shown_text(earlier)} and by --set {_shown_text(item)}; give it once"
            )
        try:
            out[key] = json.loads(raw, parse_int=_json_int)
        except json.JSONDecodeError:
            out[key] = raw
        knob = PRESET_KNOBS.get(key)
        if knob is not None and out[key] is None:  # as PUT /api/presets says it; "(None) must be a number" was Python's
            raise ConfigurationError(f"{key}: null is no value; give one, or leave --set {key} out")
        if knob is not None and knob.kind is not str and isinstance(out[key], str):
            spelling = knob.spelling(str(out[key]))
            raise ConfigurationError(f"{key} ({shown_value(raw)}): --set takes JSON values; write {spelling}")
    return out


def _shown_text(text: str) -> str:
    """``text`` as typed, or cut (``knobs.shown_value``) when too long for an error line."""
    return text if len(text) <= SHOWN_VALUE_CHARS else shown_value(text)


def _json_int(text: str) -> int:
    """A JSON integer of any length: ``int()`` refuses over 4,300 digits (``sys.get_int_max_str_digits``), and
    its ValueError was a traceback; the knob's check names the number instead (``knobs.shown_value``)."""
    digits = text.lstrip("-")
    value = 0
    for start in range(0, len(digits), 4000):
        part = digits[start : start + 4000]
        value = value * 10 ** len(part) + int(part)
    return -value if text.startswith("-") else value


def add_reindex_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    """``rag reindex`` (also used by ``scripts/reindex.py``)."""
    parser: argparse.ArgumentParser = commands.add_parser("reindex", help="index files and folders (incremental)")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to index")
    parser.add_argument(
        "--collection", dest="collection_given", default=None, metavar="NAME", help="collection (default 'default')"
    )
    parser.add_argument(
        "--strategy",
        choices=list_strategies(),
        default=None,
        help="chunking strategy; auto (the default) picks one per file by its type",
    )
    parser.add_argument(
        "--prune", action="store_true", help="delete documents whose files are gone, or passed over or skipped now"
    )
    parser.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="store sources relative to DIR (default: the checkout holding each file, found by .git; else absolute)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="re-chunk unchanged documents too (a chunk whose text is unchanged keeps its stored vector)",
    )
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
    query.add_argument(
        "--context",
        default="chatbot",
        metavar="PRESET",
        help="preset name, a rag_configurations row (default %(default)s)",
    )
    query.add_argument(
        "--collection", default="default", metavar="NAME", help="collection to search (default 'default')"
    )
    query.add_argument(
        "--max-chunks", type=int, default=None, metavar="N", help="at most N chunks (default: the preset's)"
    )
    query.add_argument(
        "--graph-weight", type=float, default=None, metavar="W", help="graph walk's share, 0..1 (0 = off)"
    )
    query.add_argument(
        "--set",
        action="append",
        default=[],
        type=set_item,
        metavar="KEY=VALUE",
        help="a per-call override of retrieve(), VALUE as JSON (true, 0.5), e.g. max_tokens=500, min_relevance=0, "
        'filters=\'{"source_prefix": "docs/"}\'',
    )
    query.add_argument("--json", action="store_true", help="the whole result as JSON")
    query.set_defaults(handler=_query)

    evaluate = commands.add_parser(
        "eval", help="score retrieval on a BEIR dataset or a markdown-documentation set (nDCG@10, recall, MRR)"
    )
    evaluate.add_argument(
        "dataset_dir",
        metavar="DATASET_DIR",
        help="BEIR (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) or documentation (docs/, queries.jsonl, "
        "qrels/<split>.tsv over file#section ids, asked through retrieve() with max_chunks 10)",
    )
    evaluate.add_argument(
        "--context", default="search", metavar="PRESET", help="preset whose knobs are used (default %(default)s)"
    )
    evaluate.add_argument(
        "--retriever",
        choices=["hybrid", "vector", "fulltext"],
        default="hybrid",
        help="both arms, or one alone (its weight 1, the other's 0); default %(default)s",
    )
    evaluate.add_argument("--no-rerank", action="store_true", help="skip the cross-encoder")
    evaluate.add_argument("--split", default="test", help="the qrels split (default %(default)s)")
    evaluate.add_argument(
        "--collection", default=None, metavar="NAME", help="collection to index into (default beir-<dir> or docs-<dir>)"
    )
    evaluate.add_argument(
        "--depth",
        type=int,
        metavar="N",
        default=None,
        help="candidates per arm (chunks); default 300 for BEIR, the preset's for docs",
    )
    evaluate.add_argument(
        "--set",
        action="append",
        default=[],
        type=set_item,
        metavar="KEY=VALUE",
        help="a preset override, e.g. expand_query=false",
    )
    evaluate.add_argument("--run-out", default=None, metavar="FILE", help="write the TREC run file")
    evaluate.add_argument("--json", action="store_true", help="print the numbers as JSON")
    evaluate.add_argument("--quiet", action="store_true", help="no progress bars")
    evaluate.set_defaults(handler=_eval)
