"""The embedded server's OS user is created once when processes start together on a fresh machine."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rag_service.db.server_user import adopt_orphaned_files

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(os.geteuid() != 0, reason="the server user exists only when we are root"),
]

CREATOR = """
import sys, time
from pathlib import Path
from rag_service.db.server_user import ensure_server_user
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
print(ensure_server_user(sys.argv[1]).pw_uid, flush=True)
"""


def test_processes_starting_together_create_one_user(tmp_path: Path) -> None:
    # Unlocked, four concurrent useradd calls all succeed and each process sees its own uid.
    name = f"rag_t{uuid.uuid4().hex[:8]}"
    go = tmp_path / "go"
    creators = [
        subprocess.Popen([sys.executable, "-c", CREATOR, name, str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    try:
        time.sleep(1.0)  # every creator is waiting for the signal (they import in well under a second)
        go.touch()
        uids = {int(proc.communicate(timeout=60)[0]) for proc in creators}
        assert uids == {pwd.getpwnam(name).pw_uid}, f"the creators saw uids {uids}"
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


def test_files_of_a_vanished_uid_are_adopted_and_others_left_alone(tmp_path: Path) -> None:
    user = pwd.getpwuid(os.getuid())
    orphaned = tmp_path / "pg"
    (orphaned / "base").mkdir(parents=True)
    (orphaned / "base" / "file").write_text("x")
    vanished = max(entry.pw_uid for entry in pwd.getpwall() if entry.pw_uid < 60000) + 1
    for path in (orphaned, orphaned / "base", orphaned / "base" / "file"):
        os.chown(path, vanished, vanished)

    assert adopt_orphaned_files(orphaned, user)
    assert {p.stat().st_uid for p in (orphaned, orphaned / "base", orphaned / "base" / "file")} == {user.pw_uid}

    nobody = pwd.getpwnam("nobody")
    os.chown(orphaned, nobody.pw_uid, nobody.pw_gid)
    assert not adopt_orphaned_files(orphaned, user), "a directory of an existing user was taken"
    assert orphaned.stat().st_uid == nobody.pw_uid
