"""Every engine connects with a deadline and TCP keepalives: a server that takes the connection and never answers
(a frozen or overloaded host, a wrong port behind a firewall) hung every command forever."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import OperationalError

from rag_service.config import Settings
from rag_service.db.engine import CONNECT_TIMEOUT_S, check_connection, connect_defaults, make_engine
from rag_service.db.replicas import CONNECT_TIMEOUT_S as REPLICA_CONNECT_TIMEOUT_S
from rag_service.db.replicas import open_replicas
from rag_service.errors import DatabaseUnavailableError


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP listener that accepts every connection and never sends a byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for sock in held:
        sock.close()


def test_defaults_unless_the_url_sets_them() -> None:
    defaults = connect_defaults("postgresql+psycopg://u@h/db")
    assert defaults["connect_timeout"] == CONNECT_TIMEOUT_S == 10
    assert defaults["keepalives"] == 1 and defaults["tcp_user_timeout"] > 0
    own = connect_defaults("postgresql+psycopg://u@h/db?connect_timeout=3&keepalives_idle=5")
    assert "connect_timeout" not in own and "keepalives_idle" not in own and own["keepalives_count"] > 0


def test_a_connection_carries_them(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
        parameters = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
    assert parameters["connect_timeout"] == str(CONNECT_TIMEOUT_S)
    assert parameters["keepalives"] == "1" and parameters["tcp_user_timeout"] == "60000"


def test_a_silent_server_fails_in_one_line_within_the_timeout(silent_port: int, tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"postgresql+psycopg://rag:pw@127.0.0.1:{silent_port}/rag"
    engine = make_engine(url, Settings(database_url=url, data_dir=tmp_path), connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailableError, match=r"^cannot connect to .*127\.0\.0\.1.*timeout") as caught:
        check_connection(engine)
    assert time.monotonic() - started < 8
    assert "\n" not in str(caught.value) and "pw" not in str(caught.value)


def test_replicas_give_up_sooner(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(database_url=None, data_dir=tmp_path, read_database_url="postgresql://u@127.0.0.1:1/db")
    (replica,) = open_replicas(settings)
    seen: dict[str, object] = {}

    @event.listens_for(replica.database.engine, "do_connect")
    def _capture(dialect, record, cargs, cparams):  # type: ignore[no-untyped-def]
        seen.update(cparams)

    with pytest.raises(OperationalError):
        replica.database.engine.connect()
    assert seen["connect_timeout"] == REPLICA_CONNECT_TIMEOUT_S == 2 and seen["keepalives"] == 1
