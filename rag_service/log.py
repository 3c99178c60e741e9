"""Logging set-up and secret masking for database URLs."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# linear in the text: a scheme is at most 32 characters and a password (RFC 3986 userinfo) holds no
# unescaped "/", so no match attempt scans far (unbounded, a 30,000-letter word in an error took 9.6 s)
_PASSWORD_IN_URL = re.compile(r"(?P<head>[a-z][a-z0-9+.-]{0,31}://[^:/@\s]*:)(?P<secret>[^@\s/]*)(?=@)", re.I)
_PASSWORD_PARAM = re.compile(r"(?P<head>password=)(?P<secret>[^&\s]+)", re.I)
#: the URL a message shows as the form to use: its placeholder password stays readable (masked, the user could not
#: tell that a password goes there)
URL_TEMPLATE = "postgresql+psycopg://USER:PASSWORD@HOST:5432/DBNAME"
_TEMPLATE_USERINFO = "psycopg://USER:PASSWORD"


def mask_url(text: str) -> str:
    """Replace passwords in any database URL inside ``text`` with ``***``."""
    masked = _PASSWORD_IN_URL.sub(_masked, text)
    return _PASSWORD_PARAM.sub(lambda m: m.group("head") + "***", masked)


def _masked(match: re.Match[str]) -> str:
    if match.group(0).endswith(_TEMPLATE_USERINFO):  # URL_TEMPLATE's placeholder
        return match.group(0)
    return match.group("head") + ("***" if match.group("secret") else "")


_base_factory = logging.getLogRecordFactory()


def _masking_factory(*args: object, **kwargs: object) -> logging.LogRecord:
    record = _base_factory(*args, **kwargs)
    if isinstance(record.msg, str):
        record.msg = mask_url(record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(mask_url(a) if isinstance(a, str) else a for a in record.args)
    return record


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is at each record: one made under a redirect since closed (a test's capture) would
    print a "Logging error" traceback for a record logged at exit."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:  # the base class sets it; stderr is read at each record instead
        pass


def configure_logging(level: str = "WARNING") -> None:
    """Log to stderr at ``level``; every record in the process (any logger) has URL passwords masked."""
    logging.setLogRecordFactory(_masking_factory)
    logger = logging.getLogger("rag_service")
    logger.setLevel(level.upper())
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


@contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """transformers' (and huggingface_hub's) progress bars off while a model loads, then as they were:
    their switch is process-wide, and the caller's own downloads keep their bars."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


@contextmanager
def quiet_root_logger() -> Iterator[None]:
    """Stop third-party ``logging.basicConfig()``/``logging.warning()`` calls configuring the root logger."""
    root = logging.getLogger()
    guard = logging.NullHandler() if not root.handlers else None
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)
