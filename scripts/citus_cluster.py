"""Start or stop a local Citus cluster (coordinator + workers) from the embedded PostgreSQL binaries.

    .venv/bin/python scripts/citus_cluster.py start [--workers 2] [--shards 8]   # prints RAG_DATABASE_URL=...
    RAG_DATABASE_URL=... .venv/bin/rag db upgrade        # distributes the tables by collection
    .venv/bin/python scripts/citus_cluster.py stop

Builds Citus into the embedded tree first when needed (``../shared/tools/build-citus.sh``). The
cluster's description is kept in ``--state`` (default ``.rag_citus.json``) for ``stop``; data lives
in a temporary directory that ``stop`` removes. For benchmarks: point ``RAG_DATABASE_URL`` at the
coordinator and run the same script against one node and against the cluster.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.citus_cluster import CitusCluster  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=8, help="citus.shard_count (shards per distributed table)")
    parser.add_argument("--state", type=Path, default=REPO / ".rag_citus.json")
    args = parser.parse_args(argv)
    if args.action == "start":
        if args.state.exists():
            print(f"a cluster is described in {args.state}; run `stop` first", file=sys.stderr)
            return 1
        cluster = CitusCluster.start(workers=args.workers, shards=args.shards)
        cluster.save(args.state)
        print(f"RAG_DATABASE_URL={cluster.coordinator.url}")
        return 0
    if not args.state.exists():
        print(f"no cluster described in {args.state}", file=sys.stderr)
        return 1
    CitusCluster.load(args.state).stop()
    args.state.unlink()
    print("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
