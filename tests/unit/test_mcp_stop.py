"""``rag mcp`` stopped by a signal exits 0 also when the stop's unwinding raised an exception group (anyio)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import anyio
import pytest

from rag_service import shutdown
from rag_service.config import Settings
from rag_service.integrations import mcp_server


class _Service:
    def warm_up(self, context: str) -> None:
        pass

    def close(self) -> None:
        pass


def _unwound(*args: Any) -> None:  # what a clean-clone run of the stop-signal test raised once
    raise BaseExceptionGroup(
        "unhandled errors in a TaskGroup",
        [RuntimeError("Attempted to exit a cancel scope that isn't the current tasks's current cancel scope")],
    )


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    pytest.importorskip("mcp.server.mcpserver")
    monkeypatch.setattr("rag_service.service.build_service", lambda settings: _Service())
    monkeypatch.setattr(mcp_server, "build_server", lambda service, **options: object())
    monkeypatch.setattr(anyio, "run", _unwound)
    monkeypatch.setattr(mcp_server, "freeze_startup_objects", lambda: None)
    monkeypatch.setattr(mcp_server, "configure_logging", lambda level: None)
    monkeypatch.setattr(logging.getLogger("rag_service"), "propagate", True)  # _run turns it off: put back after
    args = argparse.Namespace(log_level="WARNING", allow_indexing=None)
    return lambda: mcp_server._run(args, Settings())


def test_an_exception_group_after_a_stop_signal_is_the_stop(run, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(shutdown, "_RAISED", [15])
    assert run() == 0
    assert capsys.readouterr().err.strip().endswith("rag mcp: stopped")


def test_an_exception_group_without_a_stop_is_raised(run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(shutdown, "_RAISED", [])
    with pytest.raises(BaseExceptionGroup):
        run()
