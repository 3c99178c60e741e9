"""Read the HNSW graphs into shared_buffers before the first search (``warm_up``: ``rag serve``, ``rag mcp``).

A vector search walks pages of the graph at random: ~3,500 of them at 1M chunks (ef_search 800). After a
server start they come from the OS cache (~19 us a page) or the disk, so at 1M the first few hundred
searches took 50 ms where a warm one takes 13 (docs/benchmarks.md, "Session 16"). ``pg_prewarm`` reads a
graph in one sequential pass instead (1.7 GB in ~1 s from the OS cache). It is PostgreSQL's contrib
extension: created when the role may (the embedded server's superuser), otherwise used if installed and
skipped if not. On Citus the graphs live in the workers' shards: the coordinator has none to read.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from rag_service.db.database import Database
from rag_service.db.replicas import PRIMARY, ReadRouter
from rag_service.db.shared_memory import HUGE_PAGES_FROM_BYTES, SharedMemory, read_shared_memory
from rag_service.errors import DatabaseError, first_line

#: a graph is read only while the graphs read so far fit in this share of shared_buffers; past it, reading
#: one would evict the pages every search needs (the postings' and rows' index pages) for a graph that
#: cannot stay cached whole anyway
SHARED_BUFFERS_SHARE = 0.5
logger = logging.getLogger(__name__)

# every HNSW index of the chunk table or of one of its partitions (one per collection), smallest first
_GRAPHS = text(
    "SELECT ic.oid::regclass::text, pg_relation_size(ic.oid) FROM pg_index i "
    "JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam "
    "WHERE am.amname = 'hnsw' AND ic.relkind = 'i' AND pg_relation_size(ic.oid) > 0 AND ("
    "i.indrelid = to_regclass('document_chunks') OR i.indrelid IN ("
    "SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass('document_chunks'))) "
    "ORDER BY 2, 1"
)
_EXTENSION_STATE = text(
    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'), "
    "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'), "
    "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
)


@dataclass(frozen=True, slots=True)
class Prewarmed:
    """What one server read: the graphs (name, bytes), those left out (over ``share`` of shared_buffers) and the
    time taken."""

    graphs: tuple[tuple[str, int], ...] = ()
    left_out: tuple[tuple[str, int], ...] = ()
    seconds: float = 0.0
    share: float = SHARED_BUFFERS_SHARE
    skipped: str | None = None  # why nothing was read (no pg_prewarm), or None
    memory: SharedMemory | None = None  # the server's shared memory, named in the line when the graphs are large

    def line(self, server: str) -> str:
        """One line for the log."""
        if self.skipped:
            return f"{server}: HNSW graphs not prewarmed ({self.skipped})"
        read = ", ".join(f"{name} ({size / 2**20:.1f} MB)" for name, size in self.graphs) or "none"
        out = f"{server}: HNSW graphs read into shared_buffers in {self.seconds:.1f} s: {read}"
        if self.left_out:
            over = ", ".join(f"{name} ({size / 2**20:.1f} MB)" for name, size in self.left_out)
            out += f"; left out, over {self.share:.0%} of shared_buffers: {over}"
        graphs = sum(size for _, size in self.graphs + self.left_out)
        if self.memory is not None and graphs >= HUGE_PAGES_FROM_BYTES:  # where huge pages pay (db.status)
            out += f"; {self.memory.describe(data_bytes=graphs)}"
        return out


def ensure_prewarm_extension(database: Database) -> str | None:
    """Create ``pg_prewarm`` when it is missing and this role may (a superuser: the extension is not a trusted
    one; a standby gets it from its primary); returns why it is not there, or None."""
    try:
        state = database.read(lambda session: session.execute(_EXTENSION_STATE).one())
        installed, available, superuser = bool(state[0]), bool(state[1]), bool(state[2])
        if installed:
            return None
        if not available:
            return "the server has no pg_prewarm (PostgreSQL's contrib modules are not installed)"
        if not superuser:
            return "pg_prewarm is not installed in this database; a superuser can CREATE EXTENSION pg_prewarm"
        with database.transaction() as session:
            session.execute(text("CREATE EXTENSION IF NOT EXISTS pg_prewarm"))
    except (DBAPIError, DatabaseError) as exc:
        return f"pg_prewarm: {first_line(exc)}"
    return None


def prewarm_graphs(database: Database, *, share: float = SHARED_BUFFERS_SHARE) -> Prewarmed:
    """Read every HNSW graph of the chunks into ``database``'s shared_buffers, smallest first, while they fit
    in ``share`` of it. Works on a standby (a read-only transaction)."""
    return database.read(lambda session: _prewarm(session, share))


def _installed(session: Session) -> bool:
    return session.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'")).first() is not None


def _prewarm(session: Session, share: float) -> Prewarmed:
    if not _installed(session):
        return Prewarmed(skipped="the pg_prewarm extension is not installed; CREATE EXTENSION pg_prewarm to enable it")
    session.execute(text("SET LOCAL statement_timeout = 0"))  # a graph read from disk may take a while
    budget = share * int(session.execute(text("SELECT pg_size_bytes(current_setting('shared_buffers'))")).scalar_one())
    started = time.perf_counter()
    read: list[tuple[str, int]] = []
    left_out: list[tuple[str, int]] = []
    used = 0
    for name, size in session.execute(_GRAPHS).all():
        if used + size > budget:
            left_out.append((name, size))
            continue
        session.execute(text("SELECT pg_prewarm(CAST(:name AS regclass))"), {"name": name})
        used += size
        read.append((name, size))
    memory = read_shared_memory(session.connection())
    return Prewarmed(tuple(read), tuple(left_out), time.perf_counter() - started, share, memory=memory)


def prewarm_search_servers(router: ReadRouter) -> list[str]:
    """``prewarm_graphs`` on every server a search may read from (the replicas, then the primary); logs and
    returns a line for each. Never raises: a server that cannot be reached says so in its line."""
    missing = ensure_prewarm_extension(router.primary)
    servers = [(replica.name, replica.database) for replica in router.replicas] + [(PRIMARY, router.primary)]
    lines = []
    for name, database in servers:
        try:
            done = prewarm_graphs(database)
        except (DBAPIError, DatabaseError) as exc:
            lines.append(f"{name}: HNSW graphs not prewarmed ({first_line(exc)})")
            continue
        if done.skipped and missing:
            done = Prewarmed(skipped=missing)
        lines.append(done.line(name))
    for line in lines:
        logger.info(line)
    return lines
