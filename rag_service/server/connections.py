"""Bounds on ``rag serve``'s connections: a deadline for each request's head, and a cap on connections.

uvicorn closes an idle keep-alive connection after 5 s, but nothing closes one whose request head never
completes: a client that opens sockets and sends a header line now and then (slowloris) held ~1,000 of
them and every later client was refused (no file descriptors left). Here a connection must complete each
request head within ``RAG_API_HEADER_TIMEOUT_S`` of opening or of its previous answer, else it gets a 408
(when it sent part of one) and is closed; a request whose head arrived is never cut by it, however long its
body or answer takes. Past ``RAG_API_MAX_CONNECTIONS`` open connections, requests get uvicorn's 503.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rag_service.server.config import ServerConfig


def uvicorn_options(config: ServerConfig) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that apply ``config``'s connection bounds."""
    return {"http": head_timeout_protocol(config.header_timeout_s), "limit_concurrency": config.max_connections}


def head_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools, else h11) with a deadline of ``seconds`` for each request head.

    Both of uvicorn's protocols make a new ``cycle`` when a head is complete and call
    ``on_response_complete`` when an answer is sent; uvicorn arms its keep-alive timer there only when no
    pipelined request waits, which is exactly when the next head is awaited.
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    base: Any = AutoHTTPProtocol
    refusal = (
        f"the request head did not arrive within {seconds:g} s (RAG_API_HEADER_TIMEOUT_S); send it at once\n"
    ).encode()

    class HeadDeadline(base):  # type: ignore[misc]
        _deadline: asyncio.TimerHandle | None = None
        _awaited: object = None  # the cycle current when the deadline was armed: a new one is a new head
        _partial = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._partial = True
            super().data_received(data)
            if self._deadline is not None and self.cycle is not self._awaited:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.timeout_keep_alive_task is not None:  # idle, waiting for the next head
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._awaited, self._partial = self.cycle, False
            self._deadline = self.loop.call_later(seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self.cycle is not self._awaited:
                return
            if self._partial:
                head = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                self.transport.write(head + b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(refusal) + refusal)
            self.transport.close()

    return HeadDeadline
