"""Retrieval stages: vector and full-text search, fusion, reranking, MMR, parents, query handling."""
