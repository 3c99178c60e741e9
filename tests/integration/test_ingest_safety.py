"""Data safety of ingestion against a real, committing PostgreSQL: what a reindex, a prune or a commit
must never lose or bring back."""

from __future__ import annotations

from sqlalchemy import text

from rag_service.db.database import Database
from rag_service.embed import HashingEmbedder
from rag_service.ingest.pipeline import Indexer


def _stored(db: Database, collection: str) -> dict[str, str]:
    with db.transaction() as session:
        rows = session.execute(
            text("SELECT source, content FROM documents WHERE collection = :c"), {"c": collection}
        ).all()
    return {source: content for source, content in rows}


def _paragraph(word: str) -> str:
    return f"# {word}\n\n{word} is a paragraph about write-ahead logging and crash recovery, long enough to chunk.\n"


# -- commits are synchronous whatever the database sets ---------------------------------------------------


def test_ingest_commits_synchronously_where_the_database_turned_it_off(fresh_database, settings):
    engine = fresh_database.engine
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE commit_modes (source text, mode text)"))
        conn.execute(
            text(
                "CREATE FUNCTION record_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO commit_modes VALUES (NEW.source, current_setting('synchronous_commit')); "
                "RETURN NEW; END $$"
            )
        )
        conn.execute(
            text(
                "CREATE TRIGGER record_commit_mode AFTER INSERT OR UPDATE ON documents "
                "FOR EACH ROW EXECUTE FUNCTION record_commit_mode()"
            )
        )
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)

    def index_with_database_setting(mode: str, source: str) -> str:
        with engine.begin() as conn:
            conn.execute(text(f'ALTER DATABASE "{engine.url.database}" SET synchronous_commit = {mode}'))
        engine.dispose()  # new connections start with the database's setting
        with engine.connect() as conn:
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == mode
        assert indexer.index_texts([(source, "", _paragraph("Durable"))], collection="t").added == 1
        with engine.connect() as conn:
            recorded = conn.execute(text("SELECT mode FROM commit_modes WHERE source = :s"), {"s": source})
            return str(recorded.scalar_one())

    assert index_with_database_setting("off", "off.md") == "on"
    assert index_with_database_setting("remote_apply", "stronger.md") == "remote_apply", "a stronger setting stays"
