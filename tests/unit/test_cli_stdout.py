"""``rag`` with its stdout closed (``>&-``) says so and fails, as ``echo hi >&-`` reports its write error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_service.cli import main


@pytest.mark.parametrize("argv", [["query", "backups"], ["db", "status"], ["reindex", "docs"]])
def test_a_command_whose_stdout_is_closed_fails_with_one_line_and_does_nothing(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))  # were a command run, not on the user's data
    # Python sets sys.stdout to None when fd 1 is closed and print() then writes nothing: exit 0, no output
    monkeypatch.setattr(sys, "stdout", None)
    assert main(argv) == 1
    assert capsys.readouterr().err == "rag: stdout is closed; nothing was written\n"


def test_a_process_started_with_fd_1_closed_sees_it(tmp_path: Path) -> None:
    run = subprocess.run(  # the shell's >&- closes fd 1 before rag starts
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "rag_service.cli", "query", "backups"],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        env={**os.environ, "RAG_DATA_DIR": str(tmp_path)},
    )
    assert (run.returncode, run.stderr) == (1, "rag: stdout is closed; nothing was written\n")
