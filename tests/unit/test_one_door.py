"""One door: the HTTP server, the MCP server and the integrations reach the data only through ``UniversalRAGService``.

The check reads the source (every import statement, at module level, in functions and under
``TYPE_CHECKING``, and every ``importlib.import_module`` / ``__import__`` of a constant name): no
module under ``rag_service/server/`` or ``rag_service/integrations/`` (the MCP server lives there)
imports ``rag_service.db``, ``rag_service.ingest`` or ``rag_service.retrieve``. The CLI
(``rag_service/cli*.py``) calls the service too; of the database it imports only the one admin
module, ``rag_service.db.admin`` (migrate, status, the embedded server).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rag_service"
#: what only the service may import
BEHIND_THE_SERVICE = ("rag_service.db", "rag_service.ingest", "rag_service.retrieve")
#: the CLI's one way to the database besides the service
ADMIN = "rag_service.db.admin"
_IMPORTERS = {"import_module", "__import__"}


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(path: Path, node: ast.ImportFrom, root: Path) -> str:
    """The absolute module of ``from ... import``, relative imports resolved against ``path``'s package."""
    if not node.level:
        return node.module or ""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """``(line, name)`` of everything ``path`` imports: ``M`` for ``import M``, ``M.n`` for ``from M import n``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(path, node, root)
            found.extend(
                (node.lineno, module if alias.name == "*" else f"{module}.{alias.name}") for alias in node.names
            )
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in _IMPORTERS and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def _behind(module: str) -> bool:
    return any(module == hidden or module.startswith(hidden + ".") for hidden in BEHIND_THE_SERVICE)


def violations(paths: list[Path], *, allowed: tuple[str, ...] = (), root: Path = ROOT) -> list[str]:
    """One line per import of a module behind the service (``allowed`` modules and their members aside)."""
    lines = []
    for path in paths:
        by_line: dict[int, list[str]] = {}
        for line, module in imported_modules(path, root):
            if _behind(module) and not any(module == ok or module.startswith(ok + ".") for ok in allowed):
                by_line.setdefault(line, []).append(module)
        lines.extend(
            f"{path.relative_to(root)}:{line} imports {', '.join(names)}" for line, names in sorted(by_line.items())
        )
    return lines


def front_modules() -> list[Path]:
    """Every module of the HTTP server, the MCP server and the framework integrations."""
    return sorted([*(PACKAGE / "server").rglob("*.py"), *(PACKAGE / "integrations").rglob("*.py")])


def cli_modules() -> list[Path]:
    """Every module of the ``rag`` command (``rag serve`` and ``rag mcp`` are front modules)."""
    return sorted(PACKAGE.glob("cli*.py"))


def test_the_check_reads_every_front_module() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in front_modules()}
    expected = {
        "rag_service/server/api.py",
        "rag_service/server/ops.py",
        "rag_service/server/jobs.py",
        "rag_service/integrations/mcp_server.py",
        "rag_service/integrations/langchain.py",
        "rag_service/integrations/llama_index.py",
    }
    assert expected <= names, expected - names
    assert {"rag_service/cli.py", "rag_service/cli_commands.py"} <= {
        p.relative_to(ROOT).as_posix() for p in cli_modules()
    }


def test_the_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    probe = tmp_path / "rag_service" / "server" / "probe.py"  # a copy of the layout, not the package itself
    probe.parent.mkdir(parents=True)
    source = (
        "from typing import TYPE_CHECKING\n"
        "import rag_service.db.catalog\n"
        "from rag_service import ingest\n"
        "from ..retrieve import fusion\n"
        "if TYPE_CHECKING:\n"
        "    from rag_service.db.collections import CollectionInfo\n"
        "def later():\n"
        "    from rag_service.ingest.loaders import load_document\n"
        "    import importlib\n"
        "    importlib.import_module('rag_service.retrieve.rerank')\n"
        "from rag_service.service import UniversalRAGService\n"
    )
    probe.write_text(source)
    found = violations([probe], root=tmp_path)
    lines = sorted(int(entry.split(":")[1].split()[0]) for entry in found)
    assert lines == [2, 3, 4, 6, 8, 10], found


def test_server_mcp_and_integrations_call_only_the_service() -> None:
    found = violations(front_modules())
    assert not found, (
        "these modules go around UniversalRAGService; give the service a public method for what they need "
        "and call that:\n" + "\n".join(found)
    )


def test_the_cli_calls_the_service_and_the_one_admin_module() -> None:
    found = violations(cli_modules(), allowed=(ADMIN,))
    assert not found, (
        f"the CLI calls UniversalRAGService, and {ADMIN} for database administration; these go around both:\n"
        + "\n".join(found)
    )


#: what a front module may read of the service's database handle: its URL, to name it in a message
DISPLAY_ONLY = {"url_for_display"}


def database_handle_uses(path: Path, root: Path = ROOT) -> list[str]:
    """One line per use of ``<...>.service.db`` (or ``service.db``) in ``path`` beyond ``DISPLAY_ONLY``: a front
    module handing the service's database to a function goes around the service as an import would."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "db"):
            continue
        owner = node.value
        named = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else None
        parent = parents.get(node)
        if named == "service" and not (isinstance(parent, ast.Attribute) and parent.attr in DISPLAY_ONLY):
            found.append(f"{path.relative_to(root)}:{node.lineno} uses the service's database handle")
    return found


def test_front_modules_do_not_hand_the_services_database_around() -> None:
    """`DELETE /api/documents` called ``stored_sources_like(state.service.db, ...)`` on its 404 path: no import
    of the database, so the import check passed."""
    found = [line for path in front_modules() for line in database_handle_uses(path)]
    assert not found, "give the service a public method for it and call that:\n" + "\n".join(found)


def test_the_handle_check_sees_a_use(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "run(lookup, state.service.db, x)\nservice.db.read(f)\nprint(state.service.db.url_for_display)\n"
    )
    assert [line.split(":")[1].split()[0] for line in database_handle_uses(probe, root=tmp_path)] == ["1", "2"]
