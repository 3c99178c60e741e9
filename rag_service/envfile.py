"""What the working directory's ``.env`` may configure.

Every ``rag`` command reads ``RAG_*`` from ``./.env`` for what the environment leaves unset: that is how a
user keeps their own settings beside a checkout. But ``cd their-docs && rag reindex .`` (or ``rag serve``,
``rag query``) runs in someone else's repository, and a ``.env`` committed there would set the server's
write token, open CORS to a site, or send every question and passage to an LLM endpoint of theirs. So the
settings that grant access or send data elsewhere (``GUARDED``, and every ``RAG_LLM_*``) are not taken from
a ``.env`` that git tracks (someone committed it; ``git ls-files``), nor from one in a checkout when git
cannot say; one warning names those ignored and why. An untracked ``.env`` (one's own, git-ignored or in
no checkout) configures everything, as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from rag_service.git_tracked import git_tracks

log = logging.getLogger(__name__)

#: settings a committed ``.env`` may not set: they grant access, open the server to other sites, or say where
#: the data (documents, questions, passages) goes; every ``RAG_LLM_*`` too
GUARDED = frozenset(
    {
        "RAG_API_TOKEN",
        "RAG_API_READ_TOKEN",
        "RAG_API_CORS_ORIGINS",
        "RAG_API_ALLOWED_HOSTS",
        "RAG_DATABASE_URL",
        "RAG_READ_DATABASE_URL",
        "RAG_DATA_DIR",
    }
)

V = TypeVar("V")

#: (file, names) already warned about in this process: a command reads its settings more than once
_WARNED: set[tuple[Path, tuple[str, ...]]] = set()


def guarded(name: str) -> bool:
    """Whether the variable ``name`` (any case) is one a committed ``.env`` may not set."""
    upper = name.upper()
    return upper in GUARDED or upper.startswith("RAG_LLM_")


def usable(values: Mapping[str, V], path: Path) -> dict[str, V]:
    """``values`` read from the ``.env`` at ``path``, without the guarded ones when that file is committed
    (one warning naming those the environment does not set anyway)."""
    names = sorted(name.upper() for name in values if guarded(name))
    if not names:
        return dict(values)
    why = committed(path)
    if why is None:
        return dict(values)
    ignored = tuple(name for name in names if name not in os.environ)
    if ignored and (path.resolve(), ignored) not in _WARNED:
        _WARNED.add((path.resolve(), ignored))  # before a command configures logging: a bare line on stderr
        log.warning(
            "ignored %s from %s: %s, and settings that grant access or send data elsewhere come only from the "
            "environment or an untracked .env; export them to use them",
            ", ".join(ignored),
            path.resolve(),
            why,
        )
    return {name: value for name, value in values.items() if not guarded(name)}


def committed(path: Path) -> str | None:
    """Why the ``.env`` at ``path`` counts as someone else's (git tracks it, or it lies in a checkout and git
    cannot say), or None when it is one's own."""
    tracked = git_tracks(path)
    if tracked is True:
        return "git tracks that file (someone committed it)"
    if tracked is False:
        return None
    return f"it lies in a git checkout and git could not say whether it is committed ({tracked})"
