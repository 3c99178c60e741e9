"""Every ``Database.read`` sees one snapshot: a commit between two of its statements is not visible."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from rag_service.embed import HashingEmbedder
from rag_service.ingest.indexer import Indexer


def test_a_reindex_committed_between_two_statements_of_one_read_is_not_seen(fresh_database, settings):
    indexer = Indexer(fresh_database, HashingEmbedder(), settings)
    indexer.index_texts([("a", "A", "Version one of the document about vacuum and bloat. " * 3)], collection="t")

    def two_statements(session: Session) -> tuple[str, str]:
        query = text("SELECT string_agg(content, '|' ORDER BY chunk_index) FROM document_chunks")
        first = session.execute(query).scalar_one()
        # another connection commits a new version of the document in between (a concurrent reindex)
        indexer.index_texts([("a", "A", "Version two, rewritten about autovacuum tuning. " * 3)], collection="t")
        return first, session.execute(query).scalar_one()

    first, second = fresh_database.read(two_statements)
    assert "Version one" in first
    assert second == first, "the second statement saw the reindex: the read was torn"
    assert "Version two" in fresh_database.read(
        lambda s: s.execute(text("SELECT string_agg(content, '|') FROM document_chunks")).scalar_one()
    )


def test_reads_are_read_only(fresh_database):
    query = text("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')")
    level, read_only = fresh_database.read(lambda s: s.execute(query).one())
    assert (level, read_only) == ("repeatable read", "on")
