"""Stop signals, sent for real to this process: SIGTERM raises like SIGINT, and a deferred stop waits for its block."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from rag_service.server.command import _run_until_stopped
from rag_service.shutdown import Interrupted, deferred_stop, exit_status, interrupted, stop_signals


def test_sigterm_raises_interrupted_within_stop_signals_and_the_handler_is_restored_after() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as raised, stop_signals():
        os.kill(os.getpid(), signal.SIGTERM)  # Python runs the handler before the next line
        pytest.fail("SIGTERM did not raise")
    assert raised.value.signum == signal.SIGTERM and exit_status(raised.value) == 143
    assert signal.getsignal(signal.SIGTERM) is before


def test_psycopgs_rollback_warning_after_a_stop_is_not_printed(monkeypatch, caplog) -> None:
    """A stop inside the dialect's first-connect lookup (a psycopg savepoint) left its rollback failing, and psycopg's
    "error ignored in rollback" warning reached stderr beside ``terminated`` (a cold ``rag query`` stopped early)."""
    from rag_service import shutdown

    monkeypatch.setattr(shutdown, "_RAISED", [])
    driver = logging.getLogger("psycopg")
    with caplog.at_level(logging.WARNING, logger="psycopg"), stop_signals():
        driver.warning("a warning before any stop")
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            pytest.fail("SIGTERM did not raise")
        driver.warning("error ignored in rollback of <psycopg.Transaction '_pg3_1'>: another command is in progress")
    assert [r.getMessage() for r in caplog.records] == ["a warning before any stop"]
    assert not driver.filters, "the filter is removed with the handlers"


@pytest.fixture
def sigint_as_usual() -> Iterator[None]:
    """SIGINT raising KeyboardInterrupt, as in a process started from a terminal (a suite started in the
    background by a script inherits SIGINT ignored, and Python then leaves it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_as_usual")
def test_a_stop_inside_deferred_stop_takes_effect_when_the_block_ends() -> None:
    finished = []
    with pytest.raises(KeyboardInterrupt) as raised, deferred_stop():
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
        finished.append("the block ran to its end")
    assert finished == ["the block ran to its end"]
    assert exit_status(raised.value) == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


#: code that Python reports as importlib's own (where it takes and releases its import locks)
_IN_IMPORTLIB = compile("import sys\nframe = sys._getframe()", "<frozen importlib._bootstrap>", "exec")


def _importlib_frame() -> Any:
    where: dict[str, Any] = {}
    exec(_IN_IMPORTLIB, where)
    return where["frame"]


@pytest.mark.usefixtures("sigint_as_usual")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_that_comes_inside_importlib_is_raised_a_moment_later_outside_it(stop: signal.Signals) -> None:
    # raised there, it left an import lock held: a cold `rag query` stopped early hung on its threads' imports
    with stop_signals():
        handler = signal.getsignal(stop)
        assert callable(handler)
        try:
            handler(stop, _importlib_frame())
        except KeyboardInterrupt:
            pytest.fail(f"{stop.name} was raised inside importlib's code")
        with pytest.raises(KeyboardInterrupt) as raised:
            time.sleep(10)  # the stop is sent again shortly; a real signal interrupts the sleep
    assert exit_status(raised.value) == 128 + stop


def test_interrupted_carries_what_was_done_and_keeps_the_signal() -> None:
    stop = interrupted(Interrupted(signal.SIGTERM), partial={"updated": 3})
    assert isinstance(stop, KeyboardInterrupt) and stop.partial == {"updated": 3} and exit_status(stop) == 143


class _SignalledEarly(uvicorn.Server):
    """uvicorn, sent ``stop`` inside its event loop just before it installs its own signal handlers."""

    def __init__(self, stop: signal.Signals) -> None:
        super().__init__(uvicorn.Config(_asgi_app, log_level="critical", lifespan="on"))
        self.stop = stop

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        signal.raise_signal(self.stop)
        await super().serve(sockets)


async def _asgi_app(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_rag_serve_stops_on_a_signal_that_comes_before_uvicorn_listens(
    sigint_as_usual: None, stop: signal.Signals, capsys: pytest.CaptureFixture[str]
) -> None:
    # asyncio's runner took such a SIGINT and cancelled uvicorn mid-startup; the server then ran on
    server = _SignalledEarly(stop)
    fired = threading.Event()
    watchdog = threading.Timer(20, lambda: (fired.set(), setattr(server, "should_exit", True)))
    watchdog.start()
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            assert _run_until_stopped(server, "127.0.0.1", listener.getsockname()[1], sockets=[listener]) == 0
    finally:
        watchdog.cancel()
    assert not fired.is_set(), f"{stop.name} did not stop the server; the watchdog did after 20 s"
    assert server._captured_signals[:1] == [stop]
    assert "rag serve: stopped" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("sigint_as_usual")
def test_a_ctrl_c_while_rag_builds_its_parser_says_interrupted_and_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the parser (and the modules its commands import) came before the stop signals were taken: a
    # KeyboardInterrupt traceback, and death by the signal
    from rag_service import cli

    build_parser = cli.build_parser

    def interrupted_while_building() -> Any:
        signal.raise_signal(signal.SIGINT)
        return build_parser()

    monkeypatch.setattr(cli, "build_parser", interrupted_while_building)
    try:
        code = cli.main(["query", "backups"])
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped rag's main()")
    assert (code, capsys.readouterr().err) == (130, "interrupted\n")


def test_a_second_stop_while_main_reports_its_end_is_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a Ctrl-C while main() printed a database error (its except handler) escaped as a traceback, rc -2
    from rag_service import cli

    def reporting_when_stopped(argv: object = None) -> int:
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(cli, "main", reporting_when_stopped)
    with pytest.raises(SystemExit) as exited:
        try:
            cli.run()
        except KeyboardInterrupt:
            pytest.fail("the stop escaped run()")
    assert (exited.value.code, capsys.readouterr().err) == (143, "terminated\n")
