"""Asking git about someone's checkout (is a path committed, what is ignored) without running anything that
checkout configures."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: the checkout is the one not trusted: its config must run nothing (core.fsmonitor is a command)
_UNTRUSTED = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "--literal-pathspecs")


def run_git(folder: Path, args: list[str], *, timeout: float) -> subprocess.CompletedProcess[bytes] | str:
    """``git -C folder args`` with the checkout's configuration kept from running anything (pathspecs literal);
    the reason, as one line, when git is missing or could not run."""
    try:
        return subprocess.run(
            [*_UNTRUSTED, "-C", str(folder), *args], capture_output=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        return "git is not installed"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"git failed: {exc}"


def git_said(done: subprocess.CompletedProcess[bytes]) -> str:
    """Why a git command failed: the last line of what it said (git's last line says why), else its status."""
    said = done.stderr.decode(errors="replace").strip()
    return said.rsplit("\n", 1)[-1] if said else f"git exited {done.returncode}"


def git_tracks(path: Path) -> bool | str:
    """True when git tracks ``path`` (a file, or any file below a folder), False when it does not or ``path`` lies
    in no checkout, else the reason git could not say (git missing or failing inside a checkout)."""
    path = path.resolve()
    folder = path.parent
    in_checkout = any((parent / ".git").exists() for parent in (folder, *folder.parents))
    if not in_checkout:
        return False  # in no checkout: nobody committed it (and no git process to start)
    done = run_git(folder, ["ls-files", "--error-unmatch", "--", path.name], timeout=10)
    if isinstance(done, str):
        return done
    if done.returncode in (0, 1):  # 1: a checkout, and nothing of path is in it
        return done.returncode == 0
    return git_said(done)
