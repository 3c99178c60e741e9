"""Bearer tokens: ``RAG_API_TOKEN`` for writes, ``RAG_API_READ_TOKEN`` (when set) for reads.

Tokens are compared with ``hmac.compare_digest`` (constant time). The write token also grants reads.
Without a write token the server serves reads only: every write answers 403.
"""

from __future__ import annotations

import hmac

from rag_service.server.config import ServerConfig
from rag_service.server.errors import ApiError

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _matches(given: str | None, expected: str | None) -> bool:
    if given is None or expected is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


class Guard:
    """FastAPI dependencies that check the request's bearer token."""

    def __init__(self, config: ServerConfig) -> None:
        self._write = config.write_token
        self._read = config.reads_token

    def read(self, token: str | None) -> None:
        """Allow the request when reads are open or ``token`` is the read or the write token."""
        if self._read is None:
            return
        if _matches(token, self._read) or _matches(token, self._write):
            return
        raise ApiError(
            401, "unauthorized", "reads need 'Authorization: Bearer <RAG_API_READ_TOKEN>'", headers=_CHALLENGE
        )

    def write(self, token: str | None) -> None:
        """Allow the request only with the write token; 403 when the server has none."""
        if self._write is None:
            raise ApiError(
                403, "read_only", "this server is read-only: start it with RAG_API_TOKEN set to enable writes"
            )
        if not _matches(token, self._write):
            message = "writes need 'Authorization: Bearer <RAG_API_TOKEN>'"
            raise ApiError(401, "unauthorized", message, headers=_CHALLENGE)
