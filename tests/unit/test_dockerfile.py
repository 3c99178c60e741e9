"""The Dockerfile copies what the repository holds: ``COPY migrations`` outlived the folder's move into the package,
and ``docker compose up -d --build`` stopped at that step."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_path_the_dockerfile_copies_is_in_the_repository() -> None:
    copied = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copied += [w for w in words[1:-1] if not w.startswith("--")]
    assert copied, "the Dockerfile copies the package"
    assert [path for path in copied if not (REPO / path).exists()] == []
