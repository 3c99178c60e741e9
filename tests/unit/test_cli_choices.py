"""A mistyped subcommand or choice of ``rag`` is a usage error naming the closest choice."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rag_service.cli import build_parser, main
from rag_service.cli_commands import parse_sets
from rag_service.errors import ConfigurationError
from rag_service.knobs import check_knobs


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [
        (["index", "docs"], "index", "reindex"),
        (["qury", "backups"], "qury", "query"),
        (["db", "stat"], "stat", "status"),
        (["ingest", "docs"], "ingest", "reindex"),
        (["search", "backups"], "search", "query"),
        (["init"], "init", "db"),
        (["db", "init"], "init", "upgrade"),
    ],
)
def test_a_mistyped_subcommand_names_the_one_meant(
    argv: list[str], typo: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    error = capsys.readouterr().err.splitlines()[-1]
    assert exited.value.code == 2
    assert error.startswith("rag") and f"invalid choice: '{typo}'" in error
    assert error.endswith(f"did you mean '{meant}'?"), error


def test_nonsense_gets_the_list_alone(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["zzz"])
    error = capsys.readouterr().err.splitlines()[-1]
    assert "choose from" in error and "did you mean" not in error


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["query", "x", "--bogus"], "rag query"), (["db", "status", "--x"], "rag db status"), (["mcp", "--y"], "rag mcp")],
)
def test_an_unknown_option_shows_its_commands_usage(argv: list[str], command: str, capsys) -> None:  # type: ignore[no-untyped-def]
    """It showed ``rag``'s top usage, which lists no option of the command."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    error = capsys.readouterr().err
    assert exited.value.code == 2 and error.startswith(f"usage: {command} ")
    assert error.splitlines()[-1] == f"{command}: error: unrecognized arguments: {argv[-1]}"


def test_force_is_described_as_it_works_re_chunking_and_reusing_vectors(capsys: pytest.CaptureFixture[str]) -> None:
    """``--force`` reuses the stored vector of every unchanged chunk text ("0 embedded, N reused")."""
    from rag_service.server.schemas import DocumentsRequest

    with pytest.raises(SystemExit):
        main(["reindex", "--help"])
    force = " ".join(capsys.readouterr().out.split("\n  --force", 1)[1].split("\n  --all", 1)[0].split())
    assert "re-embed" not in force and "re-chunk unchanged documents too" in force and "vector" in force
    description = DocumentsRequest.model_fields["force"].description or ""
    assert "re-embed" not in description and "keep vectors" in description


@pytest.mark.parametrize(
    "argv", [["reindex"], ["query"], ["eval"], ["demo"], ["graph", "build"], ["metadata", "build"]]
)
def test_every_collection_option_shows_its_value_as_name(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    usage = capsys.readouterr().out
    assert "--collection NAME" in usage and "COLLECTION" not in usage, usage


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["query", "x", "--jsn"], "--json"),
        (["query", "x", "--contxt", "agent"], "--context"),
        (["query", "x", "--contxt=agent"], "--context"),
        (["reindex", "docs", "--colection", "kb"], "--collection"),
    ],
)
def test_a_mistyped_option_names_the_one_meant(argv: list[str], meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    # it said only "unrecognized arguments"
    with pytest.raises(SystemExit) as exited:
        main(argv)
    error = capsys.readouterr().err.splitlines()[-1]
    assert exited.value.code == 2 and error.endswith(f"; did you mean {meant}?"), error


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its name: ``"db upgrade"``, ``"query"``..."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        found[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}".strip())

    walk(build_parser(), "")
    return found


def test_no_help_shows_an_internal_destination_name() -> None:
    # `rag reindex --help` showed `--collection COLLECTION_GIVEN`
    for name, parser in _commands().items():
        for action in parser._actions:
            longs = [o[2:] for o in action.option_strings if o.startswith("--")]
            if longs and action.nargs != 0 and action.dest.replace("_", "-") not in longs:
                assert action.metavar is not None, f"rag {name} {longs[0]} shows {action.dest.upper()}"


def test_query_help_gives_the_default_preset_and_collection(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default chatbot)" in shown and "(default 'default')" in shown


def test_serve_help_names_its_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    assert "RAG_API_TOKEN" in shown and "RAG_API_READ_TOKEN" in shown


@pytest.mark.parametrize("level", ["INFO", "info", "Info"])
def test_serve_and_mcp_take_a_log_level_in_either_case(level: str) -> None:
    # `rag serve --log-level INFO` was refused while `rag mcp` listed its levels in capitals
    parser = build_parser()
    assert parser.parse_args(["serve", "--log-level", level]).log_level == "info"
    assert parser.parse_args(["mcp", "--log-level", level]).log_level == "INFO"


@pytest.mark.parametrize(
    "argv",
    [["presets", "search", "--set", "max_chunks"], ["query", "backups", "--set", "=6"], ["eval", "d", "--set", "x"]],
)
def test_a_set_item_without_key_and_value_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Found before any database is opened, and exit 2 as every usage error (README: "usage errors exit 2")."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    error = capsys.readouterr().err.splitlines()[-1]
    assert exited.value.code == 2
    assert f"argument --set: invalid set_item value: {argv[-1]!r}" not in error, "argparse's own wording, not ours"
    assert f"{argv[-1]!r} must look like key=value" in error, error


@pytest.mark.parametrize(
    ("digits", "shown"), [("9" * 5000, "999999999999…, 5000 digits"), ("-" + "1" * 9000, "-111111111111…, 9000 digits")]
)
def test_a_set_number_of_any_length_is_read_not_a_traceback(digits: str, shown: str) -> None:
    """json.loads raised ValueError over 4,300 digits and parse_sets caught only JSONDecodeError (audit 53b 8)."""
    value = parse_sets([f"max_chunks={digits}"])["max_chunks"]
    assert isinstance(value, int) and value == (1 if digits[0] == "9" else -1) * sum(
        10**power for power in range(len(digits.lstrip("-")))
    ) * int(digits[-1])
    with pytest.raises(ConfigurationError) as raised:
        check_knobs({"max_chunks": value})
    assert str(raised.value) == f"max_chunks ({shown}) must be between 1 and 1000"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # read as text, these were "expand_query ('True') must be true or false", "... must be a number" (audit 53b 9)
        (["query", "x", "--set", "expand_query=True"], "expand_query ('True'): --set takes JSON values; write true"),
        (["presets", "agent", "--set", "return_parents=False"], "return_parents ('False'): --set takes JSON values; "),
        (["query", "x", "--set", "min_relevance=.5"], "min_relevance ('.5'): --set takes JSON values; write 0.5"),
        (["query", "x", "--set", "max_chunks=05"], "max_chunks ('05'): --set takes JSON values; write 5"),
        # "max_chunks (None) must be a whole number": Python's word for what was typed as null
        (["query", "x", "--set", "max_chunks=null"], "max_chunks: null is no value; give one, or leave --set max_"),
        (
            ["eval", "d", "--set", "max_chunks=ten"],
            "max_chunks ('ten'): --set takes JSON values; write a whole number ",
        ),
        # one of the two silently won
        (
            ["query", "x", "--max-chunks", "3", "--set", "max_chunks=7"],
            "max_chunks is given twice, by --max-chunks 3 and by --set max_chunks=7; give it once",
        ),
        (
            ["query", "x", "--set", "graph_weight=0.1", "--graph-weight", "0.5"],
            "graph_weight is given twice, by --graph-weight 0.5 and by --set graph_weight=0.1; give it once",
        ),
        (
            ["presets", "agent", "--set", "max_chunks=3", "--set", "max_chunks=7"],
            "max_chunks is given twice, by --set max_chunks=3 and by --set max_chunks=7; give it once",
        ),
    ],
)
def test_a_set_value_is_refused_with_the_spelling_wanted(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Found before any database or model is opened: one line, exit 1."""
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    assert main(argv) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(f"error: {message}"), error
    assert not any(tmp_path.iterdir()), "nothing started: no embedded database, no model export"
