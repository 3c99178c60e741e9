"""Helpers for the tests that time a server from outside (marked ``timing``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The test process's garbage collector collected, then off until the block ends.

    A full collection of the test process (pytest, the libraries its conftest imports) takes 120-160 ms
    here; landing inside one timed request it made the server look 5x slower on its first answer (captured
    with ``gc.callbacks``: every failing run had a generation-2 collection in the first request).
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
