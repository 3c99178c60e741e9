"""Fails when code reaches into a private member (``obj._name``) of one of the package's classes from
outside that class. What another class needs is public, or passed in.

The check reads the source: a private name counts as a class's when the class assigns ``self._name``
or defines ``_name`` in its body; ``obj._name`` is refused outside every class defining ``_name``.
Private members of other libraries' classes (``argparse._SubParsersAction``) are not its business.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rag_service"
#: (module, name) of another library's private member that shares its name with one of ours, and why
OTHER_LIBRARIES = {
    ("rag_service/db/embedded.py", "_lock"): "pgserver's PostgresServer._lock, its inter-process lock",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_names(cls: ast.ClassDef) -> set[str]:
    """Private names a class defines: in its body, or assigned as ``self._name`` in its methods."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _private(node.target.id):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name) and _private(t.id))
    for node in ast.walk(cls):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and _private(target.attr)
            ):
                names.add(target.attr)
    return names


def private_reaches(package: Path = PACKAGE) -> list[str]:
    """``file:line: expression`` of each ``obj._name`` outside the classes defining ``_name``."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(package.rglob("*.py"))}
    owners: dict[str, set[str]] = defaultdict(set)  # private name -> the classes defining it
    for tree in trees.values():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for name in _own_names(cls):
                owners[name].add(cls.name)
    found: list[str] = []

    def visit(node: ast.AST, enclosing: str | None, path: Path) -> None:
        if isinstance(node, ast.ClassDef):
            enclosing = node.name
        if (
            isinstance(node, ast.Attribute)
            and node.attr in owners
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            and enclosing not in owners[node.attr]
            and (path.relative_to(package.parent).as_posix(), node.attr) not in OTHER_LIBRARIES
        ):
            found.append(f"{path.relative_to(package.parent)}:{node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, enclosing, path)

    for path, tree in trees.items():
        visit(tree, None, path)
    return found


def test_no_class_reaches_into_another_class_private_members() -> None:
    assert private_reaches() == [], "make the member public, or pass what is needed in"


def test_the_check_sees_a_reach_and_allows_a_class_its_own(tmp_path: Path) -> None:
    package = tmp_path / "rag_service"
    package.mkdir()
    (package / "parts.py").write_text(
        "class Indexer:\n"
        "    def __init__(self):\n"
        "        self._cache = {}\n"
        "    def _chunk(self, other):\n"
        "        return other._cache\n"  # another instance of its own class: allowed
        "class Batch:\n"
        "    def add(self, indexer):\n"
        "        return indexer._chunk(indexer)\n"
        "def helper(parser):\n"
        "    return parser._actions\n"  # no class of the package defines it: another library's
    )
    assert private_reaches(package) == ["rag_service/parts.py:8: indexer._chunk"]
