"""The random walk with restart agrees with networkx's personalised PageRank."""

from __future__ import annotations

import networkx as nx
import pytest

from rag_service.retrieve.graph import personalised_pagerank

EDGES = [(1, 2, 1.0), (2, 1, 0.5), (2, 3, 0.8), (3, 4, 0.6), (4, 2, 0.3), (5, 1, 1.0), (1, 6, 0.2)]


def test_the_walk_is_networkx_personalised_pagerank_with_dangling_nodes_restarting():
    restart = {1: 0.7, 5: 0.3}
    ours = personalised_pagerank(EDGES, restart, damping=0.7, iterations=200)
    graph = nx.DiGraph()
    graph.add_weighted_edges_from(EDGES)
    reference = nx.pagerank(
        graph, alpha=0.7, personalization=restart, dangling=restart, weight="weight", tol=1e-12, max_iter=1000
    )
    assert ours == pytest.approx(reference, abs=1e-9)
    assert sum(ours.values()) == pytest.approx(1.0)


def test_a_few_iterations_are_close_and_unreached_chunks_score_nothing():
    restart = {1: 1.0}
    exact = personalised_pagerank(EDGES, restart, damping=0.7, iterations=200)
    few = personalised_pagerank(EDGES, restart, damping=0.7, iterations=10)
    assert max(abs(few[n] - exact[n]) for n in exact) < 0.03
    assert exact[5] == 0.0, "nothing leads to chunk 5"
    assert exact[3] > 0 and exact[4] > 0, "reached through chunk 2"
