"""Asking git whether a path in someone's checkout is committed, without running anything that checkout configures."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git_tracks(path: Path) -> bool | str:
    """True when git tracks ``path`` (a file, or any file below a folder), False when it does not or ``path`` lies
    in no checkout, else the reason git could not say (git missing or failing inside a checkout)."""
    path = path.resolve()
    folder = path.parent
    in_checkout = any((parent / ".git").exists() for parent in (folder, *folder.parents))
    if not in_checkout:
        return False  # in no checkout: nobody committed it (and no git process to start)
    try:
        done = subprocess.run(
            # the repository is the one not trusted: its config must run nothing (core.fsmonitor is a command)
            ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-C", str(folder), "ls-files",
             "--error-unmatch", "--", path.name],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except FileNotFoundError:
        reason = "git is not installed"
    except (OSError, subprocess.SubprocessError) as exc:
        reason = f"git failed: {exc}"
    else:
        if done.returncode in (0, 1):  # 1: a checkout, and nothing of path is in it
            return done.returncode == 0
        said = done.stderr.strip()
        reason = said.rsplit("\n", 1)[-1] if said else f"git exited {done.returncode}"  # git's last line says why
    return reason
