"""A byte-forwarding proxy from a unix socket to PostgreSQL's: ``down()`` is an outage, ``up()`` ends it;
``freeze()`` is a server that accepts connections and answers nothing (SIGSTOP, a hung host), ``thaw()`` ends it."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path


class SocketProxy:
    """Listens on ``<folder>/.s.PGSQL.<port>`` and forwards every connection to ``target``."""

    def __init__(self, folder: Path, target: str, port: int = 5432) -> None:
        self.path = folder / f".s.PGSQL.{port}"
        self.target = target
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()

    def freeze(self) -> None:
        """Hold every byte in both directions (connections are still accepted) until ``thaw()``."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again, the bytes held first."""
        self._flowing.set()

    def up(self) -> None:
        """Accept connections (again)."""
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and cut every open one, as a crashed server would."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self.path.unlink(missing_ok=True)
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                server.connect(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
