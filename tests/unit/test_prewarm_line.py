"""The prewarm's log line (``db.prewarm.Prewarmed.line``) names the server's shared memory when its graphs are large."""

from __future__ import annotations

from rag_service.db.prewarm import Prewarmed
from rag_service.db.shared_memory import SharedMemory

GIB = 1024**3


def _memory(status: str) -> SharedMemory:
    return SharedMemory(shared_buffers="6026MB", huge_pages="try", status=status, pages_needed=3112)


def test_a_large_graph_on_4_kb_pages_gets_the_huge_pages_to_reserve():
    line = Prewarmed(graphs=(("ix_graph", 2 * GIB),), seconds=1.0, memory=_memory("off")).line("primary")
    assert line.startswith("primary: HNSW graphs read into shared_buffers in 1.0 s: ix_graph (2048.0 MB); ")
    assert line.endswith("or `sysctl -w vm.nr_hugepages=3112`, before the server's next start")


def test_a_graph_left_out_counts_and_huge_pages_in_use_are_said_so():
    left_out = Prewarmed(left_out=(("ix_graph", 2 * GIB),), share=0.0, memory=_memory("on")).line("replica 1")
    expected = "left out, over 0% of shared_buffers: ix_graph (2048.0 MB); shared_buffers 6026MB on huge pages"
    assert left_out.endswith(expected)


def test_small_graphs_leave_the_memory_out_of_the_line():
    line = Prewarmed(graphs=(("ix_graph", GIB // 4),), seconds=0.1, memory=_memory("off")).line("primary")
    assert line == "primary: HNSW graphs read into shared_buffers in 0.1 s: ix_graph (256.0 MB)"
