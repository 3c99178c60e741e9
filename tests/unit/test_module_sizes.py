"""Fails when a product module grows past the style's limit (STYLE.md: small modules, < 450 lines).

Migrations are left out: a revision is a record of one schema change, read once, never split.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rag_service"
#: the most lines a product module may have
MAX_LINES = 450


def oversized_modules(package: Path = PACKAGE, *, limit: int = MAX_LINES) -> list[str]:
    """``path (lines)`` of every module under ``package`` longer than ``limit`` lines, migrations aside."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if "migrations" in path.relative_to(package).parts:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(package.parent)} ({lines})")
    return found


def test_no_product_module_is_over_the_limit() -> None:
    assert oversized_modules() == [], f"split these by responsibility (at most {MAX_LINES} lines each)"


def test_the_check_sees_a_long_module_and_skips_migrations(tmp_path: Path) -> None:
    package = tmp_path / "rag_service"
    (package / "migrations" / "versions").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * 3)
    (package / "long.py").write_text("x = 1\n" * 4)
    (package / "migrations" / "versions" / "0001_long.py").write_text("x = 1\n" * 4)
    assert oversized_modules(package, limit=3) == ["rag_service/long.py (4)"]
