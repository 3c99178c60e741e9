"""``rag presets``: every preset a line, one preset's knobs, a change that every later call follows."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_cli import cli_env, rag  # noqa: F401 (cli_env is a fixture)

pytestmark = pytest.mark.multiprocess


def test_presets_are_listed_shown_and_changed(cli_env):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0

    listed = rag(cli_env, "presets")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:3] == ["preset", "chunks", "tokens"]
    assert [line.split()[0] for line in lines[1:]] == ["chatbot", "agent", "search", "workflow", "context_engineering"]
    agent_row = next(line.split() for line in lines if line.startswith("agent "))
    assert agent_row[1:3] == ["5", "1500"] and agent_row[-1] == "0.45", "max_chunks, max_tokens, min_relevance"

    shown = rag(cli_env, "presets", "agent", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["max_chunks"] == 5

    changed = rag(cli_env, "presets", "agent", "--set", "max_chunks=3", "--set", "min_relevance=0.4")
    assert changed.returncode == 0, changed.stderr
    assert "max_chunks: 3" in changed.stdout and "min_relevance: 0.4" in changed.stdout.splitlines()
    again = json.loads(rag(cli_env, "presets", "agent", "--json").stdout)
    assert (again["max_chunks"], again["min_relevance"]) == (3, 0.4), "the change is stored"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("presets", "agnet"), "unknown context 'agnet'; did you mean 'agent'?"),
        (("presets", "agent", "--set", "max_chunk=3"), "did you mean max_chunks?"),
        (("presets", "agent", "--set", "max_chunks=0"), "max_chunks (0) must be between 1 and 1000"),
        (("presets", "--set", "max_chunks=3"), "--set changes one preset: name it first"),
    ],
)
def test_preset_errors_are_one_line(cli_env, args, message):  # noqa: F811
    assert rag(cli_env, "db", "upgrade").returncode == 0
    done = rag(cli_env, *args)
    assert done.returncode == 1
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
