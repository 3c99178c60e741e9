"""Where the service's rows live, for ``rag db status``: one node, LIST partitions by collection, or Citus.

On Citus the coordinator's own tables are empty shells: the sizes an operator sizes servers by are the shards'
on the workers (``citus_table_size``), and a worker that does not answer is named, not a failed report.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

from rag_service.db.citus import DISTRIBUTED_TABLES, has_citus
from rag_service.db.partitions import is_partitioned

_WORKERS = text(
    "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive "
    "ORDER BY nodename, nodeport"
)
_REACHES = text("SELECT citus_check_connection_to_node(:host, :port)")
_SHARDS = text("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = to_regclass('documents')")
_PARTITIONS = text("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('documents')")
# each distributed table's shards without their indexes, then their indexes, summed over the workers
_CITUS_SIZES = text(
    "SELECT t.name, citus_table_size(t.name), citus_total_relation_size(t.name) - citus_table_size(t.name) "
    "FROM unnest(CAST(:tables AS text[])) AS t(name) "
    "WHERE EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = to_regclass(t.name))"
)


@dataclass(frozen=True, slots=True)
class Layout:
    """One line saying how the tables are laid out; ``citus``: on a Citus coordinator."""

    line: str
    citus: bool = False
    #: the workers that did not answer the coordinator (``host:port``)
    down: tuple[str, ...] = ()


def read_layout(conn: Connection) -> Layout:
    """The layout of the database ``conn`` is connected to (its catalogs only, and on Citus one check per worker)."""
    if has_citus(conn):
        workers = [(str(host), int(port)) for host, port in conn.execute(_WORKERS)]
        down = tuple(f"{h}:{p}" for h, p in workers if not conn.execute(_REACHES, {"host": h, "port": p}).scalar())
        states = ", ".join(f"{h}:{p} {'DOWN' if f'{h}:{p}' in down else 'up'}" for h, p in workers)
        shards = conn.execute(_SHARDS).scalar() or 0
        plural = "" if len(workers) == 1 else "s"
        return Layout(
            f"Citus coordinator, {len(workers)} worker{plural} ({states or 'none added'}), {shards} shards of "
            "each table, each collection on one worker",
            citus=True,
            down=down,
        )
    if is_partitioned(conn):
        count = conn.execute(_PARTITIONS).scalar() or 0
        return Layout(f"one node, partitioned by collection ({count} collection{'' if count == 1 else 's'})")
    return Layout("one node")


def citus_sizes(conn: Connection) -> tuple[tuple[str, str, int], ...]:
    """``rag db status`` sizes on Citus: each distributed table's shards and their indexes, summed over the
    workers, largest first (fails when a worker does not answer)."""
    rows = conn.execute(_CITUS_SIZES, {"tables": list(DISTRIBUTED_TABLES)}).all()
    sizes = [("on the workers", str(name), int(table)) for name, table, _ in rows]
    sizes += [("on the workers", f"indexes of {name}", int(indexes)) for name, _, indexes in rows]
    return tuple(sorted(sizes, key=lambda size: (-size[2], size[1])))
