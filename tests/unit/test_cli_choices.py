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
