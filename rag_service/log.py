"""Logging set-up and secret masking for database URLs."""

from __future__ import annotations

import logging
import re

_PASSWORD_IN_URL = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^@\s]*)(?=@)", re.I)
_PASSWORD_PARAM = re.compile(r"(?P<head>password=)(?P<secret>[^&\s]+)", re.I)


def mask_url(text: str) -> str:
    """Replace passwords in any database URL inside ``text`` with ``***``."""
    masked = _PASSWORD_IN_URL.sub(lambda m: m.group("head") + ("***" if m.group("secret") else ""), text)
    return _PASSWORD_PARAM.sub(lambda m: m.group("head") + "***", masked)


class _MaskingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = mask_url(str(record.msg))
        if record.args:
            record.args = tuple(mask_url(a) if isinstance(a, str) else a for a in record.args)
        return True


def configure_logging(level: str = "WARNING") -> None:
    """Log to stderr at ``level`` with URL passwords masked; safe to call more than once."""
    logger = logging.getLogger("rag_service")
    logger.setLevel(level.upper())
    if not any(isinstance(f, _MaskingFilter) for f in logger.filters):
        logger.addFilter(_MaskingFilter())
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
