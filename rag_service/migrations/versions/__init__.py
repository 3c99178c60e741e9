"""Migration scripts (loaded by alembic by path, never imported)."""
