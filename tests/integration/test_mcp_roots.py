"""``rag mcp --allow-indexing``: ``index_paths`` reads only inside the allowed folders, never a hidden path."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mcp import Client

from rag_service.errors import ConfigurationError
from rag_service.integrations.mcp_roots import check_paths, index_roots, refused_path
from tests.integration.knowledge import write_docs
from tests.integration.test_mcp import mcp_env, server, session, text_of  # noqa: F401

SECRET = '{"aws_secret_access_key": "AKIA-SECRET-FROM-HIDDEN-DIR"}'


def _machine(tmp_path: Path) -> tuple[Path, Path]:
    """A project folder (the server's working directory) and, beside it, a home with secrets."""
    project, home = tmp_path / "proj", tmp_path / "home"
    write_docs(project / "kb")
    (project / ".git").mkdir()
    (project / ".env").write_text("RAG_API_TOKEN=x\n")
    (project / ".config").mkdir()
    (project / ".config" / "app.json").write_text(SECRET)
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials.json").write_text(SECRET)
    (home / "notes").mkdir()
    (home / "notes" / "plan.md").write_text("# Plan\n\nThe quarterly plan mentions lighthouses twice.\n")
    (project / "kb" / "creds.json").symlink_to(home / ".aws" / "credentials.json")
    (project / "kb" / "env.md").symlink_to(project / ".env")
    return project, home


def test_no_folder_named_in_the_root_or_home_folder_is_refused(tmp_path: Path, monkeypatch) -> None:
    """MCP clients often start servers in /: the working directory as the root let an agent index /etc/passwd."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for where in (Path("/"), tmp_path):
        with pytest.raises(ConfigurationError, match=r"name the folders it may index: --allow-indexing DIR"):
            index_roots([], cwd=where)
    assert index_roots(["/tmp"], cwd=Path("/")) == (Path("/tmp").resolve(),)
    (tmp_path / "docs").mkdir()
    assert index_roots([], cwd=tmp_path / "docs") == ((tmp_path / "docs").resolve(),)


def test_paths_outside_the_roots_or_hidden_are_refused_after_links_and_dots(tmp_path: Path) -> None:
    project, home = _machine(tmp_path)
    roots = index_roots([], cwd=project)
    assert roots == (project.resolve(),)
    for path in ("kb", "kb/ops.md", str(project), f"{project}/kb/../kb", "./kb/"):
        assert refused_path(path, roots, cwd=project) is None, path
    outside = refused_path(str(home / ".aws" / "credentials.json"), roots, cwd=project)
    assert outside == (
        f"{str(home / '.aws' / 'credentials.json')!r} is outside the folders this server may index ({project}); "
        "name a path inside them, or start rag mcp with --allow-indexing DIR [DIR ...] to allow other folders"
    )
    for path in ("../home/notes", "/", "kb/../../home", "kb/creds.json"):  # a link inside that leads out
        assert "is outside the folders" in str(refused_path(path, roots, cwd=project)), path
    for path, part in ((".env", ".env"), (".config/app.json", ".config"), ("kb/env.md", ".env"), (".git", ".git")):
        problem = str(refused_path(path, roots, cwd=project))
        assert f"has the hidden part {part!r}; hidden files and folders are never indexed here" in problem, path
        assert str(project) in problem and "\n" not in problem
    several = check_paths(["kb", "/", ".env"], roots, cwd=project)
    assert several is not None and several.endswith("(1 more path(s) refused; nothing was indexed)")
    # named roots: relative to the working directory; a hidden root named by the user is theirs
    named = index_roots(["../home/notes", str(home / ".aws")], cwd=project)
    assert named == ((home / "notes").resolve(), (home / ".aws").resolve())
    assert refused_path(str(home / ".aws" / "credentials.json"), named, cwd=project) is None
    assert refused_path("kb", named, cwd=project) is not None
    with pytest.raises(ConfigurationError, match=r"^--allow-indexing 'nope' is not a folder \("):
        index_roots(["nope"], cwd=project)


@pytest.mark.multiprocess
def test_an_agent_cannot_index_secrets_through_index_paths(mcp_env, tmp_path):  # noqa: F811
    project, home = _machine(tmp_path)
    aws = str(home / ".aws")
    calls = [
        ("index_paths", {"paths": [aws], "collection": "loot"}),
        ("index_paths", {"paths": [str(home / ".aws" / "credentials.json")], "collection": "loot"}),
        ("index_paths", {"paths": ["kb", ".env"], "collection": "loot"}),
        ("index_paths", {"paths": ["kb/creds.json"], "collection": "loot"}),
        ("index_paths", {"paths": ["kb"], "collection": "kb"}),  # the walk skips kb's links to hidden files
        ("search_knowledge", {"query": "aws secret access key", "collection": "kb", "context": "search"}),
        ("list_collections", {}),
    ]
    _, results = asyncio.run(session(server(mcp_env, project, "--allow-indexing"), calls))
    *refused, indexed, found, listed = results
    for result in refused:
        assert result.is_error and text_of(result).startswith("index_paths: '"), text_of(result)
        assert "\n" not in text_of(result) and "AKIA" not in text_of(result)
    assert "is outside the folders this server may index" in text_of(refused[0])
    assert "has the hidden part '.env'" in text_of(refused[2])
    assert not indexed.is_error and "2 added" in text_of(indexed)
    assert "AKIA" not in text_of(found)
    assert [c["name"] for c in json.loads(text_of(listed))["collections"]] == ["kb"]

    # --allow-indexing DIR ...: those folders instead, as the tool's description says
    async def described() -> str:
        params = server(mcp_env, project, "--allow-indexing", str(home / "notes"))
        async with Client(params, read_timeout_seconds=60) as c:
            tools = {tool.name: tool for tool in (await c.list_tools()).tools}
            notes = await c.call_tool("index_paths", {"paths": [str(home / "notes")], "collection": "notes"})
            kb = await c.call_tool("index_paths", {"paths": ["kb"], "collection": "notes"})
            assert not notes.is_error and "1 added" in text_of(notes)
            assert kb.is_error and "is outside the folders" in text_of(kb)
            return str(tools["index_paths"].description)

    assert f"Only paths inside {home / 'notes'} " in asyncio.run(described())


def test_a_path_with_a_nul_byte_is_one_line(tmp_path: Path) -> None:
    assert refused_path("docs/a\x00b.md", (tmp_path,), cwd=tmp_path) == (
        "'docs/a\\x00b.md' holds a NUL byte, which no file name has; remove it"
    )
