"""The server's shared memory: ``shared_buffers`` and whether it sits on huge pages (``rag db status``, the prewarm).

Two kinds of huge page serve PostgreSQL's buffers: a reservation (``vm.nr_hugepages``, taken by ``huge_pages =
try``; PostgreSQL 17+ reports ``huge_pages_status``), and the kernel's transparent huge pages for shared memory
(``shmem_enabled``), which reserve nothing and which PostgreSQL does not see: the kernel file says, readable only
when the server runs on this machine. At 1M chunks the reservation took 18-23% off the vector arm's p95, the
transparent pages 10-27% (docs/benchmarks.md, "Session 45").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, text

#: from this much data (the service's tables and indexes) the status suggests huge pages
HUGE_PAGES_FROM_BYTES = 1024**3
#: the kernel's transparent-huge-page mode for shared memory; the selected one is in brackets
SHMEM_THP = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled")
#: the modes that put a shared anonymous mapping (PostgreSQL's buffers) on huge pages without an ``madvise``
THP_HUGE_MODES = frozenset({"always", "within_size", "force"})
_THP_ADVICE = f"`echo always > {SHMEM_THP}` (reserves no memory)"


@dataclass(frozen=True, slots=True)
class SharedMemory:
    """The server's ``shared_buffers`` and the pages its shared memory sits on."""

    shared_buffers: str
    #: ``huge_pages``: on, off or try
    huge_pages: str
    #: ``huge_pages_status``: on, off, unknown; None before PostgreSQL 17
    status: str | None
    #: ``shared_memory_size_in_huge_pages``: the huge pages the server's shared memory needs (-1: none here)
    pages_needed: int | None
    #: the kernel's ``shmem_enabled`` mode when the server runs on this machine, else None (not known)
    transparent: str | None = None

    def describe(self, *, data_bytes: int) -> str:
        """One line: the buffers and their pages; past ``HUGE_PAGES_FROM_BYTES`` of data on 4 kB pages, what
        huge pages took off the searches at 1M chunks and the two ways to get them."""
        buffers = f"shared_buffers {self.shared_buffers}"
        if self.status == "on":
            return f"{buffers} on huge pages"
        if self.transparent in THP_HUGE_MODES:
            return f"{buffers} on transparent huge pages (shmem_enabled = {self.transparent})"
        if self.status != "off":
            return buffers
        if self.huge_pages == "off":
            return f"{buffers} on 4 kB pages (huge_pages = off)"
        if data_bytes < HUGE_PAGES_FROM_BYTES or (self.pages_needed or 0) < 1:
            return f"{buffers} on 4 kB pages"
        return (
            f"{buffers} on 4 kB pages; huge pages took up to 20% off the searches' p95 at 1M chunks: as root on "
            f"the server's machine, {_THP_ADVICE} or `sysctl -w vm.nr_hugepages={self.pages_needed}`, before the "
            "server's next start"
        )


_MEMORY_SQL = text(
    "SELECT current_setting('shared_buffers'), current_setting('huge_pages'), "
    "current_setting('huge_pages_status', true), current_setting('shared_memory_size_in_huge_pages', true), "
    # a Unix socket (no address) or a loopback address: the server shares this machine's kernel
    "coalesce(inet_server_addr() <<= inet '127.0.0.0/8' OR inet_server_addr() = inet '::1', true)"
)


def selected_thp_mode(setting: str) -> str | None:
    """The selected mode of a transparent-huge-page file (``always within_size advise [never] deny force``)."""
    match = re.search(r"\[([a-z_]+)\]", setting)
    return match.group(1) if match else None


def local_shmem_thp(path: Path = SHMEM_THP) -> str | None:
    """This machine's ``shmem_enabled`` mode, or None where the kernel has no such file."""
    try:
        return selected_thp_mode(path.read_text())
    except OSError:
        return None


def read_shared_memory(conn: Connection) -> SharedMemory:
    """The server's ``SharedMemory`` (settings any role may read; the kernel's mode when the server is local)."""
    buffers, setting, status, needed, local = conn.execute(_MEMORY_SQL).one()
    pages = int(needed) if needed not in (None, "") else None
    return SharedMemory(
        shared_buffers=str(buffers),
        huge_pages=str(setting),
        status=status,
        pages_needed=pages,
        transparent=local_shmem_thp() if local else None,
    )
