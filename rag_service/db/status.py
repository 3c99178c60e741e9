"""What ``rag db status`` reports: server, extension, migration state, stored model, counts."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, text

from rag_service.db.messages import url_for_display
from rag_service.db.migrate import current_revision, head_revision
from rag_service.errors import SchemaError


@dataclass(frozen=True, slots=True)
class DatabaseStatus:
    """A snapshot of the database's state."""

    url: str
    server_version: str
    pgvector_version: str | None
    revision: str | None
    head: str
    embedding_model: str | None
    embedding_dim: int | None
    fts_config: str | None
    collections: dict[str, tuple[int, int]]  # collection -> (documents, chunks)

    @property
    def up_to_date(self) -> bool:
        """True when the schema is at the code's newest migration."""
        return self.revision == self.head

    def lines(self) -> list[str]:
        """Human-readable report lines."""
        out = [
            f"database:   {self.url}",
            f"server:     {self.server_version}",
            f"pgvector:   {self.pgvector_version or 'not installed (run `rag db upgrade`)'}",
            f"schema:     {self.revision or 'empty'} (head {self.head})"
            + ("" if self.up_to_date else " - run `rag db upgrade`"),
        ]
        if self.embedding_model:
            out.append(f"embeddings: {self.embedding_model} ({self.embedding_dim}-d), fts '{self.fts_config}'")
        else:
            out.append("embeddings: none stored yet")
        if not self.collections:
            out.append("documents:  none")
        for name, (docs, chunks) in sorted(self.collections.items()):
            out.append(f"collection: {name}: {docs} documents, {chunks} chunks")
        return out


def read_status(engine: Engine) -> DatabaseStatus:
    """Collect the status; works on an empty (unmigrated) database too."""
    with engine.connect() as conn:
        version = conn.execute(text("SHOW server_version")).scalar_one()
        vector = conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar()
        revision = current_revision(conn)
        model = dim = cfg = None
        collections: dict[str, tuple[int, int]] = {}
        if revision is not None:
            settings_row = conn.execute(
                text("SELECT embedding_model, embedding_dim, fts_config FROM index_settings WHERE id = 1")
            ).first()
            if settings_row is not None:
                model, dim, cfg = settings_row
            for name, docs, chunks in conn.execute(
                text(
                    "SELECT d.collection, count(DISTINCT d.id), coalesce(sum(d.chunk_count), 0) "
                    "FROM documents d GROUP BY d.collection"
                )
            ):
                collections[name] = (int(docs), int(chunks))
    return DatabaseStatus(
        url=url_for_display(engine),
        server_version=str(version),
        pgvector_version=vector,
        revision=revision,
        head=head_revision(),
        embedding_model=model,
        embedding_dim=dim,
        fts_config=cfg,
        collections=collections,
    )


def schema_is_current(engine: Engine) -> bool:
    """True when the database is migrated to the code's newest revision."""
    with engine.connect() as conn:
        return current_revision(conn) == head_revision()


def require_current_schema(engine: Engine) -> None:
    """Raise SchemaError unless the database is migrated to head."""
    with engine.connect() as conn:
        revision = current_revision(conn)
    head = head_revision()
    if revision != head:
        raise SchemaError(
            f"the database schema is at {revision or 'nothing'} but this code needs {head}; run `rag db upgrade`"
        )
