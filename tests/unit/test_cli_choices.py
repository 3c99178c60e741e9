"""A mistyped subcommand or choice of ``rag`` is a usage error naming the closest choice."""

from __future__ import annotations

import pytest

from rag_service.cli import main


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
