"""Progress of long runs on stderr: items done, chunks written and embedded, rate and ETA.

A bar (tqdm) on a terminal; elsewhere (``2>file``, a CI log) plain lines at a modest rate, each
10% of the items or every ``LINE_EVERY_S`` seconds, as a bar's ``\r`` redraws fill a file with copies.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType

#: called after each item with (items done, total or None); a listener that also has a ``phase(name)`` method
#: hears each step of a long write too (a bulk load's, after every document is staged: the HTTP API's jobs), and
#: one with a ``chunks(embedded, written)`` method the chunks as they are embedded and written (a job of one large
#: document showed 0 of 1 for minutes)
ProgressListener = Callable[[int, int | None], None]
#: on a stderr that is no terminal, a line at least this often while items are done (and each 10% of them)
LINE_EVERY_S = 10.0


class Progress:
    """Counts documents against ``total`` and chunks as a postfix; a no-op when disabled.

    ``listener`` (if given) hears every advance, also when the bar is disabled (the HTTP API's jobs).
    """

    def __init__(
        self,
        *,
        total: int | None,
        enabled: bool,
        label: str,
        unit: str = "doc",
        listener: ProgressListener | None = None,
    ) -> None:
        self._bar = None
        self._lines: _Lines | None = None
        if enabled and _on_a_terminal():  # tqdm only when a bar is shown: a quiet run does not import it
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit=unit, file=sys.stderr, mininterval=0.5, dynamic_ncols=True)
        elif enabled and sys.stderr is not None:
            self._lines = _Lines(label, unit, total)
        self._chunks = 0
        self._embedded = 0
        self._done = 0
        self._total = total
        self._listener = listener
        self._started = time.perf_counter()
        if listener is not None:  # the total is known before the first document finishes
            listener(0, total)

    def advance(self, *, chunks: int, items: int = 1) -> None:
        """``items`` more items done (a batch's documents at its commit: one step, so the rate and ETA are the
        batch's, not its first document's), with ``chunks`` chunks written."""
        self._chunks += chunks
        stop: KeyboardInterrupt | None = None
        for _ in range(items):  # the listener hears every item, as documented
            self._done += 1
            if self._listener is not None:
                try:
                    self._listener(self._done, self._total)
                except KeyboardInterrupt as exc:  # a stop it raises waits until every item of the step is heard
                    stop = stop or exc
        self._tell_chunks()
        if self._bar is not None:
            self._bar.set_postfix_str(self._counts(), refresh=False)
            self._bar.update(items)
        if self._lines is not None:
            self._lines.done(self._done, self._counts)
        if stop is not None:
            raise stop

    def embedded(self, chunks: int) -> None:
        """``chunks`` more chunks embedded (the model's thread): the bar moves while a batch of documents is
        still being embedded, before any of them is written (the first 1,024 chunks take ~20 s here)."""
        self._embedded += chunks
        self._tell_chunks()
        if self._bar is not None:
            self._bar.set_postfix_str(self._counts(), refresh=True)

    def _tell_chunks(self) -> None:
        heard = getattr(self._listener, "chunks", None)
        if callable(heard):
            heard(self._embedded, self._chunks)

    def _counts(self) -> str:
        """Chunks written and embedded, and the rate of the slower of the two (the model's, unless reused)."""
        seconds = max(time.perf_counter() - self._started, 1e-9)
        embedded = f", {self._embedded} embedded" if self._embedded else ""
        return f"{self._chunks} chunks{embedded}, {max(self._chunks, self._embedded) / seconds:.1f} chunks/s"

    def phase(self, name: str) -> None:
        """Show the step a long write is in (a bulk load's index builds) next to the count; tell the listener."""
        heard = getattr(self._listener, "phase", None)
        if callable(heard):
            heard(name)
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self._chunks} chunks, {name}", refresh=True)
        if self._lines is not None:
            self._lines.write(self._done, f"{self._chunks} chunks, {name}")

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._lines is not None and self._lines.shown != self._done:  # the last count, once
            self._lines.write(self._done, self._counts())


def _on_a_terminal() -> bool:
    return sys.stderr is not None and sys.stderr.isatty()


class _Lines:
    """The bar's counts as plain lines on stderr: ``indexing: 26/260 docs (10%), 310 chunks, 51.2 chunks/s``."""

    def __init__(self, label: str, unit: str, total: int | None) -> None:
        self.label, self.unit, self.total = label, unit, total
        self.shown = 0  # the count of the last line
        self._last = time.monotonic()

    def done(self, count: int, counts: Callable[[], str]) -> None:
        """A line when ``count`` reached the next 10% of the total, or ``LINE_EVERY_S`` passed since the last."""
        step = None if not self.total else -(-self.total // 10)
        crossed = step is not None and count // step > self.shown // step
        if crossed or time.monotonic() - self._last >= LINE_EVERY_S:
            self.write(count, counts())

    def write(self, count: int, counts: str) -> None:
        share = f" ({100 * count // self.total}%)" if self.total else ""
        of = f"/{self.total}" if self.total is not None else ""
        print(f"{self.label}: {count}{of} {self.unit}s{share}, {counts}", file=sys.stderr, flush=True)
        self.shown, self._last = count, time.monotonic()
