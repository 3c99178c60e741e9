"""The PATHs of an ``index_paths`` call (and uploaded file names) checked before any work: the CLI's usage errors
(exit 2), the HTTP API's 422.

Part of the service, so the CLI keeps to its one door (``tests/unit/test_one_door.py``) and never
reaches into the ingest stack itself; ``index_paths`` makes the ``--root`` check again for Python callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath

from rag_service.ingest.filetypes import SUPPORTED_SUFFIXES, file_suffix, unsupported_files
from rag_service.ingest.source_keys import check_root

__all__ = ["check_root", "only_unsupported_files", "only_unsupported_uploads"]


def only_unsupported_files(paths: Sequence[str | Path]) -> str | None:
    """One line naming ``paths`` and the supported types when every one is a file of a type not indexed
    (the run would index nothing); else None. A folder with such files among others is no error."""
    named = [Path(p) for p in paths]
    return only_unsupported_uploads(named) if all(p.is_file() for p in named) else None


def only_unsupported_uploads(names: Sequence[str | PurePath]) -> str | None:
    """One line naming the (uploaded) files ``names`` and the supported types when every one is of a type not
    indexed; else None."""
    named = [PurePath(name) for name in names]
    if named and all(file_suffix(p) not in SUPPORTED_SUFFIXES for p in named):
        return unsupported_files(named)
    return None
