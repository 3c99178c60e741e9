"""Integrations are optional: importing rag_service imports no framework; a missing extra is one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

FRAMEWORKS = ("langchain_core", "langchain", "llama_index", "mcp")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )


def test_importing_rag_service_imports_no_framework():
    done = run_python(
        f"""
        import json, sys
        import rag_service, rag_service.integrations, rag_service.cli
        from rag_service import UniversalRAGService, get_universal_rag, RAGResult
        from rag_service.integrations import mcp_server, metadata
        rag_service.cli.build_parser()
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {FRAMEWORKS!r})))
        """
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("adapter", "blocked", "extra"),
    [
        ("rag_service.integrations.langchain", "langchain_core", "langchain"),
        ("rag_service.integrations.llama_index", "llama_index", "llamaindex"),
    ],
)
def test_an_adapter_without_its_extra_names_the_pip_install(adapter, blocked, extra):
    done = run_python(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the package were not installed
        from rag_service.errors import MissingExtraError
        try:
            import {adapter}
        except MissingExtraError as exc:
            assert isinstance(exc, ImportError)
            print(exc)
        """
    )
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"{adapter} needs the {extra!r} extra")
    assert line.endswith(f"run: pip install 'rag_service[{extra}]'")


def test_rag_mcp_without_its_extra_exits_1_with_one_line():
    done = run_python(
        """
        import sys
        sys.modules["mcp"] = None  # as if the package were not installed
        from rag_service.cli import main
        sys.exit(main(["mcp"]))
        """
    )
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: rag mcp needs the 'mcp' extra") and line.endswith("pip install 'rag_service[mcp]'")
