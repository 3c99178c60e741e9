"""Where a timing's pages came from: shared_buffers, the OS cache or the disk, and how much CPU the host took.

A 1M-chunk database (20 GB) does not fit beside 6 GB of shared_buffers in 24 GB of memory, so a slow run can be
reads from disk, a cold OS cache or another tenant's CPU (steal); these counters tell which, per run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

_RELATION_BLOCKS = """
SELECT relname, coalesce(heap_blks_read, 0) + coalesce(idx_blks_read, 0) + coalesce(toast_blks_read, 0)
       + coalesce(tidx_blks_read, 0),
       coalesce(heap_blks_hit, 0) + coalesce(idx_blks_hit, 0) + coalesce(toast_blks_hit, 0) + coalesce(tidx_blks_hit, 0)
FROM pg_statio_user_tables
UNION ALL
SELECT indexrelname, idx_blks_read, idx_blks_hit FROM pg_statio_user_indexes
"""

_BUFFERCACHE = """
SELECT coalesce(c.relname, '(other)'), count(*) * 8 / 1024
FROM pg_buffercache b
LEFT JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid)
 AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
WHERE b.relfilenode IS NOT NULL
GROUP BY 1 ORDER BY 2 DESC LIMIT %s
"""


@dataclass(frozen=True)
class Snapshot:
    """Counters at one moment: per relation (blocks read from outside shared_buffers, blocks hit), the disks'
    sectors read, and the CPU's jiffies (total, steal)."""

    relations: dict[str, tuple[int, int]]
    sectors_read: int
    cpu_total: int
    cpu_steal: int


def snapshot(conn: psycopg.Connection[Any]) -> Snapshot:
    """The counters now. Backends report their I/O when idle, at most once a second: wait ~2 s after the work."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(_RELATION_BLOCKS).fetchall()
    cpu = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return Snapshot(
        relations={str(name): (int(read), int(hit)) for name, read, hit in rows},
        sectors_read=_disk_sectors_read(),
        cpu_total=sum(cpu[:8]),
        cpu_steal=cpu[7] if len(cpu) > 7 else 0,
    )


def difference(before: Snapshot, after: Snapshot, *, top: int = 8) -> dict[str, Any]:
    """What happened between two snapshots: blocks read/hit for the ``top`` relations by blocks read, MB read
    from disk, the share of CPU time the host stole."""
    changes = {
        name: (read - before.relations.get(name, (0, 0))[0], hit - before.relations.get(name, (0, 0))[1])
        for name, (read, hit) in after.relations.items()
    }
    busiest = sorted(changes.items(), key=lambda item: -item[1][0])[:top]
    ticks = max(after.cpu_total - before.cpu_total, 1)
    return {
        "blocks_read_outside_shared_buffers": sum(read for read, _ in changes.values()),
        "blocks_hit": sum(hit for _, hit in changes.values()),
        "by_relation_read_hit": {name: list(counts) for name, counts in busiest if counts[0] > 0},
        "disk_mb_read": round((after.sectors_read - before.sectors_read) * 512 / 2**20, 1),
        "cpu_steal_share": round((after.cpu_steal - before.cpu_steal) / ticks, 4),
    }


def buffercache(conn: psycopg.Connection[Any], *, top: int = 10) -> dict[str, int]:
    """MB of shared_buffers each relation holds (the ``top`` largest)."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
    return {str(name): int(mb) for name, mb in conn.execute(_BUFFERCACHE, (top,)).fetchall()}


def _disk_sectors_read() -> int:
    """Sectors read by the whole disks (those in /sys/block, less loop and RAM devices) since boot."""
    disks = {p.name for p in Path("/sys/block").iterdir() if not p.name.startswith(("loop", "ram", "zram"))}
    lines = (line.split() for line in Path("/proc/diskstats").read_text().splitlines())
    return sum(int(fields[5]) for fields in lines if fields[2] in disks)


_WRITE_COUNTERS = """
SELECT backend_type || ' / ' || context, sum(coalesce(writes, 0)), sum(coalesce(evictions, 0)),
       sum(coalesce(fsyncs, 0)), sum(coalesce(extends, 0))
FROM pg_stat_io WHERE object = 'relation' GROUP BY 1
UNION ALL SELECT 'wal (bytes, full-page images)', wal_bytes, wal_fpi, 0, 0 FROM pg_stat_wal
UNION ALL SELECT 'checkpoints (timed, requested, buffers written)', num_timed, num_requested, buffers_written, 0
FROM pg_stat_checkpointer
"""


def write_counters(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, ...]]:
    """The server's write counters now (cluster-wide): blocks written / evicted / fsynced / extended per backend
    type and I/O context, WAL bytes and full-page images, checkpoints; wait ~2 s after the work, as for reads."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {str(row[0]): tuple(int(v) for v in row[1:]) for row in conn.execute(_WRITE_COUNTERS).fetchall()}


def write_difference(before: dict[str, tuple[int, ...]], after: dict[str, tuple[int, ...]]) -> dict[str, list[int]]:
    """What was written between two ``write_counters``, rows that changed only."""
    changes = {
        name: [value - base for value, base in zip(counts, before.get(name, (0,) * len(counts)), strict=True)]
        for name, counts in after.items()
    }
    return {name: counts for name, counts in sorted(changes.items()) if any(counts)}
