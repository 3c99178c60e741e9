"""The read-only datasets next to the checkout (``../shared``), found from this file's path."""

from __future__ import annotations

from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"


def scifact_dir() -> Path:
    """The BEIR SciFact dataset; fails with one line when it is not there."""
    path = SHARED / "datasets" / "scifact"
    assert path.is_dir(), f"{path} is missing: the SciFact dataset comes with ../shared/datasets beside the checkout"
    return path
