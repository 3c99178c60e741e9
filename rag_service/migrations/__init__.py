"""Alembic migrations, shipped inside the package so an installed wheel can migrate (``rag db upgrade``)."""
