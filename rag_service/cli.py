"""The ``rag`` command: thin; library errors become one-line messages here and nowhere else.

Exit status: 0 success, 1 a user error (one line on stderr, no traceback), 2 usage errors, 130 or
143 when SIGINT or SIGTERM stopped the command (both stop it the same way, see ``shutdown``; ``rag
serve`` and ``rag mcp`` exit 0 when a stop signal ends them, as services are meant to stop).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from rag_service.db import admin  # cheap: each of its functions imports what it needs when called
from rag_service.errors import RagError, did_you_mean
from rag_service.log import configure_logging, mask_url
from rag_service.shutdown import exit_status, signal_number, stop_signals
from rag_service.terminal import visible_controls

if TYPE_CHECKING:
    from rag_service.config import Settings

Handler = Callable[[argparse.Namespace, "Settings"], int]


def _db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    partitioned = args.partition_by_collection
    print("\n".join(admin.upgrade_database(settings, revision=args.revision, partition_by_collection=partitioned)))
    return 0


def _db_status(args: argparse.Namespace, settings: Settings) -> int:
    lines, up_to_date = admin.database_status(settings)
    print(visible_controls("\n".join(lines)))  # what the database holds (names) shown, never obeyed
    replicas = admin.replica_status(settings)
    if replicas:
        print("\n".join(replicas))
    return 0 if up_to_date else 1


#: argparse's message for an unknown subcommand or choice (the choices quoted or not, by Python version)
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")
#: other tools' words for a subcommand, spelled too far from it for the closest-name hint (a new user's guesses);
#: the first of a word's subcommands among the parser's choices is named
_SYNONYMS = {
    **dict.fromkeys(("ingest", "add", "load", "upload", "import"), ("reindex",)),
    **dict.fromkeys(("search", "ask", "find", "retrieve"), ("query",)),
    **dict.fromkeys(("server", "start", "run"), ("serve",)),
    "evaluate": ("eval",),
    **dict.fromkeys(("init", "migrate", "create"), ("db", "upgrade")),
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser (and its subcommands'), whose unknown-choice error also names the closest choice."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with the usage and ``message``, plus "did you mean ...?" for a mistyped choice."""
        if found := _INVALID_CHOICE.search(message):
            typed, choices = found.group(1), [choice.strip().strip("'") for choice in found.group(2).split(",")]
            hint = did_you_mean(typed, choices) or _synonym_hint(typed.lower(), choices)
            message += f"; {hint.rstrip()}" if hint else ""
        super().error(message)


def _synonym_hint(typed: str, choices: list[str]) -> str:
    """``"did you mean 'reindex'? "`` for another tool's word of a subcommand offered here, else ``""``."""
    meant = next((name for name in _SYNONYMS.get(typed, ()) if name in choices), None)
    return "" if meant is None else f"did you mean {meant!r}? "


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(prog="rag", description="Retrieval on PostgreSQL + pgvector.")
    commands = parser.add_subparsers(dest="command", required=True)

    db = commands.add_parser("db", help="database schema")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="migrate the database to the newest schema")
    upgrade.add_argument("--revision", default="head", help=argparse.SUPPRESS)
    upgrade.add_argument(
        "--partition-by-collection",
        action="store_true",
        help="LIST-partition the (empty) document, chunk and posting tables by collection",
    )
    upgrade.set_defaults(handler=_db_upgrade)
    status = db_commands.add_parser(
        "status", help="server, schema, stored model, counts, memory, sizes; exit 1 when the schema is not at head"
    )
    status.set_defaults(handler=_db_status)

    _register_extra_commands(commands)
    return parser


def _register_extra_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Subcommands defined in their own modules (ingest, retrieval, evaluation)."""
    from rag_service import cli_commands, cli_demo, cli_graph, cli_metadata, cli_presets
    from rag_service.integrations import mcp_server
    from rag_service.server import command as serve_command  # imports nothing of the server extra

    cli_commands.register(commands)
    cli_demo.register(commands)
    cli_presets.register(commands)
    cli_metadata.register(commands)
    cli_graph.register(commands)
    mcp_server.register(commands)
    serve_command.register(commands)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``rag``; returns the exit status.

    Stop signals are taken from its first line: a Ctrl-C while the parser is built (and its modules are
    imported) says "interrupted" and exits 130 as one later does, with no traceback.
    """
    _tolerant_output()
    joined_before = admin.joined_embedded_servers()
    with stop_signals():  # also around the handlers below: a stop while one reports is no traceback
        try:
            parser = build_parser()
            args, unknown = parser.parse_known_args(argv)
            if unknown:  # argparse's own check names the top usage: `rag query x --bogus` showed `rag <command>`'s
                chosen = _chosen(parser, args)
                chosen.error(f"unrecognized arguments: {' '.join(unknown)}{_option_hints(chosen, unknown)}")
            if sys.stdout is None and args.command != "serve":  # `rag query x >&-`: print() would write nowhere
                print("rag: stdout is closed; nothing was written", file=sys.stderr)
                return 1
            from rag_service.config import load_settings  # pydantic: after the stop signals are ours
            from rag_service.embed import prefer_passive_openmp

            settings = load_settings()
            configure_logging(settings.log_level)
            prefer_passive_openmp()
            handler: Handler = args.handler
            return handler(args, settings)
        except RagError as exc:  # a message can name a file or collection: its escapes shown, not run
            print(visible_controls(f"error: {mask_url(str(exc))}"), file=sys.stderr)
            return 1
        except KeyboardInterrupt as stop:
            return _stopped(stop)
        except BrokenPipeError:  # `rag query ... | head`: the reader left; no traceback, and none at exit either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + signal.SIGPIPE
        except Exception as exc:
            message = admin.database_failure(exc)
            if message is None:
                raise
            print(f"error: {mask_url(message)}", file=sys.stderr)
            return 1
        finally:
            # now, not after the interpreter has joined its worker threads (an embedding batch can take
            # seconds): a stopped command lets the embedded server stop at once
            admin.leave_embedded_servers(keep=joined_before)


def _stopped(stop: KeyboardInterrupt) -> int:
    """Say which stop ended the command; its exit status (130 for Ctrl-C, 143 for SIGTERM)."""
    print("interrupted" if signal_number(stop) == signal.SIGINT else "terminated", file=sys.stderr)
    return exit_status(stop)


def _option_hints(parser: argparse.ArgumentParser, unknown: list[str]) -> str:
    """``"; did you mean --json?"`` for each mistyped option among ``unknown`` (``--jsn``, ``--contxt=agent``)."""
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    hints = [did_you_mean(word.partition("=")[0], options, quoted=False) for word in unknown if word.startswith("--")]
    return "".join(f"; {hint.rstrip()}" for hint in hints if hint)


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser the arguments chose: ``rag db status`` -> the ``status`` parser."""
    while subcommands := [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]:
        name = getattr(args, subcommands[0].dest, None)
        if name not in subcommands[0].choices:
            break
        parser = subcommands[0].choices[name]
    return parser


def _tolerant_output() -> None:
    """Write what stdout and stderr cannot encode as ``\\uXXXX`` escapes, never as a UnicodeEncodeError.

    A legacy console or a redirect in latin-1, cp1252 or cp437 cannot encode a Cyrillic or CJK answer, nor the
    ``—`` of a citation line: ``print`` raised, a traceback instead of the answer. Python's stderr already escapes;
    its stdout is strict. (``PYTHONUTF8=1`` or ``PYTHONIOENCODING=utf-8`` writes the characters themselves.)
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a TextIOWrapper; None when the fd is closed
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            reconfigure(errors="backslashreplace")


def run() -> None:
    """The console script: ``main`` with the process's exit, minus the interpreter's last full collection.

    Everything ``main`` made is reachable until exit, so the collector's passes over it at shutdown
    (SQLAlchemy's and onnxruntime's objects: ~0.2 s of a cold ``rag query``) free nothing that exiting
    does not; frozen, they are skipped. Exit handlers and flushes still run.
    """
    try:
        status = main()
    except KeyboardInterrupt as stop:  # a second stop, while main() reported the end of its command
        status = _stopped(stop)
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run()
