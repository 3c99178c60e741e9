"""Database access: engine and embedded server, ORM models, and the repositories that hold all SQL."""
