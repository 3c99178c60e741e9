"""The service's log handler writes to stderr as it is at each record.

A handler made while stderr was redirected (an in-process CLI call under a test's capture, a caller's
``redirect_stderr``) kept that stream: once it was closed, a record logged at exit (the embedded server's
stale-handle cleanup) printed a "--- Logging error ---" traceback instead of the line.
"""

from __future__ import annotations

import contextlib
import io
import logging

import pytest

from rag_service.log import configure_logging


@pytest.fixture
def fresh_logger():  # type: ignore[no-untyped-def]
    logger = logging.getLogger("rag_service")
    saved, level = list(logger.handlers), logger.level
    logger.handlers.clear()
    yield logger
    logger.handlers[:] = saved
    logger.setLevel(level)


def test_a_record_after_the_redirect_closed_goes_to_stderr_as_it_is_now(fresh_logger, capsys):
    captured = io.StringIO()
    with contextlib.redirect_stderr(captured):
        configure_logging("INFO")
        fresh_logger.info("while redirected")
    captured.close()
    fresh_logger.info("removed stale embedded-postgres handles %s", [1])
    err = capsys.readouterr().err
    assert "Logging error" not in err
    assert "removed stale embedded-postgres handles [1]" in err
