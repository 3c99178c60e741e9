"""Parts of ``scripts/bench.py``: synthetic corpus, database loading, timed retrievers, ingestion, report."""
