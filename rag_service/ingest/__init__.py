"""Ingestion: loaders, chunkers, garbage filter, the incremental indexer."""
