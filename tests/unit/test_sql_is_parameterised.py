"""Fails when SQL is built by string formatting anywhere in the package or the migrations.

Every statement must be a constant string, a SQLAlchemy construct, or psycopg.sql composition; values
travel as bound parameters. The check reads the source: f-strings, ``%`` / ``+`` with a string and
``.format()`` calls are refused as the argument of anything that executes SQL.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXECUTORS = {"execute", "exec_driver_sql", "text", "executemany", "execute_values", "copy"}


def _is_formatted(node: ast.AST) -> bool:
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return _has_string(node.left) or _has_string(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return isinstance(node.func.value, ast.Constant | ast.JoinedStr)
    return False


def _has_string(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "a" + x + y nests: (("a" + x) + y)
        return _has_string(node.left) or _has_string(node.right)
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr)


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def formatted_sql(path: Path, *, root: Path = ROOT) -> list[str]:
    """``file:line`` (relative to ``root``) of each call that executes SQL built by string formatting."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        executes = isinstance(node, ast.Call) and _called_name(node) in EXECUTORS and node.args
        if executes and _is_formatted(node.args[0]):  # type: ignore[attr-defined]
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def sources() -> list[Path]:
    return sorted((ROOT / "rag_service").rglob("*.py"))  # the migrations live in the package


def test_the_check_reads_the_whole_package():
    found = {path.relative_to(ROOT).as_posix() for path in sources()}
    assert len(found) >= 80, f"only {len(found)} source files under {ROOT / 'rag_service'}"
    assert {"rag_service/db/search.py", "rag_service/db/documents.py"} <= found
    assert any(name.startswith("rag_service/migrations/versions/") for name in found)


def test_no_sql_from_string_formatting():
    offenders = [hit for path in sources() for hit in formatted_sql(path)]
    assert offenders == [], f"SQL built by string formatting (use bound parameters): {offenders}"


def test_the_check_catches_formatting(tmp_path: Path):
    bad = tmp_path / "sample.py"
    bad.write_text(
        "def f(session, text, name, cur):\n"
        "    session.execute(text(f\"SELECT * FROM t WHERE name = '{name}'\"))\n"
        "    cur.execute('SELECT %s' % name)\n"
        "    cur.execute('SELECT ' + name)\n"
        "    cur.execute('SELECT {}'.format(name))\n"
        "    cur.execute('SELECT 1 WHERE x = %s', (name,))\n"
        "    cur.execute('DELETE FROM ' + name + ' WHERE true')\n"
    )
    found = sorted(hit.rsplit(":", 1)[1] for hit in formatted_sql(bad, root=tmp_path))
    assert found == ["2", "3", "4", "5", "7"]
