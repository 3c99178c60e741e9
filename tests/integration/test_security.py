"""Data-dir permissions and secret masking."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys

import pytest

from rag_service.db.embedded import harden_permissions
from rag_service.log import configure_logging, mask_url
from tests.conftest import TEST_DATA_DIR


def test_nothing_in_the_data_dir_is_world_readable(server_url):
    # server_url started (or joined) the embedded test server under TEST_DATA_DIR
    if "host=" not in server_url:
        pytest.skip("RAG_TEST_DATABASE=testcontainers: the server's files are in its container, not a data dir here")
    offenders = []
    for root, dirs, files in os.walk(TEST_DATA_DIR):
        for name in [*dirs, *files]:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if mode & stat.S_IROTH and not stat.S_ISSOCK(mode):
                offenders.append(path)
    mode = TEST_DATA_DIR.stat().st_mode
    assert not mode & stat.S_IROTH, "the data dir itself must not be listable by others"
    assert offenders == []


def test_socket_directory_admits_only_its_owner(server_url):
    if "host=" not in server_url:
        pytest.skip("RAG_TEST_DATABASE=testcontainers: the server listens on TCP, there is no socket directory")
    socket_dir = server_url.split("host=")[1].split("&")[0].replace("%2F", "/")
    mode = os.stat(socket_dir).st_mode
    assert mode & (stat.S_IRWXG | stat.S_IRWXO) == 0, oct(mode)


def test_harden_fixes_a_socket_dir_outside_pgdata(tmp_path):
    data, pgdata, sockets = tmp_path / "data", tmp_path / "data" / "pg", tmp_path / "sock"
    pgdata.mkdir(parents=True)
    sockets.mkdir(mode=0o777)
    sockets.chmod(0o777)
    (pgdata / ".handle_pids.json").write_text("[]")
    harden_permissions(data, pgdata, sockets)
    assert stat.S_IMODE(sockets.stat().st_mode) == 0o700
    assert stat.S_IMODE((pgdata / ".handle_pids.json").stat().st_mode) == 0o600
    assert not data.stat().st_mode & stat.S_IROTH


def test_urls_are_masked_in_messages_and_logs(caplog):
    assert mask_url("postgresql+psycopg://rag:s3cret@db:5432/rag") == "postgresql+psycopg://rag:***@db:5432/rag"
    assert mask_url("host=db password=s3cret user=rag") == "host=db password=*** user=rag"
    configure_logging("INFO")
    logger = logging.getLogger("rag_service.test")
    with caplog.at_level(logging.INFO, logger="rag_service"):
        logger.info("connecting to %s", "postgresql://u:hunter2@h/db")
        logger.warning("failed: postgresql://u:hunter2@h/db")
    assert "hunter2" not in caplog.text and "***" in caplog.text


#: texts an error message can echo from a request (a long word, a long secret, many URL heads)
_LONG_TEXTS = ("'x' * 200_000", "'postgresql://u:' + 'p' * 200_000", "'x://u:' * 40_000")


@pytest.mark.parametrize("expression", _LONG_TEXTS)
def test_masking_a_long_text_takes_linear_time(expression):
    """Every error message passes through ``mask_url``; a scan that restarted at each letter of a long
    word was quadratic (9.6 s for 30,000 letters, minutes here). 200,000 characters take ~0.3 s."""
    script = f"from rag_service.log import mask_url; text = {expression}; assert mask_url(text) == text"
    subprocess.run([sys.executable, "-c", script], check=True, timeout=20)
