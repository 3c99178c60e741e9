"""Asking git about someone's checkout (is a path committed, what is ignored) without running anything that
checkout configures."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: the checkout is the one not trusted: its config must run nothing (core.fsmonitor is a command). With that kept
#: from running, a checkout owned by another user (mounted into a container, unpacked as another user) is read
#: too: git refused it as of "dubious ownership" and its whole git-ignored build was indexed (audit 59b)
_UNTRUSTED = (
    "git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "safe.directory=*",
    "--literal-pathspecs",
)  # fmt: skip


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
    """Why a git command failed: its ``fatal:`` line, else the last line of what it said, else its status (a
    refusal's last line may be the command it suggests, not the reason)."""
    lines = [line.strip() for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or [f"git exited {done.returncode}"])[-1]


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
