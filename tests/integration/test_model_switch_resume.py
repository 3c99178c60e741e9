"""A switch of the embedding model stopped midway resumes without embedding again what it embedded.

A switch writes each collection's vectors in one transaction (a bulk load) or a batch at a time; either way the
vectors it embeds are kept as they are made (``db.switch_vectors``), so the next ``rag reindex --all`` embeds only
what the stopped run had not. Uses ``test_model_switch``'s two fake models and its database of five one-chunk
documents, embedded two chunks a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from rag_service.embed import HashingEmbedder
from rag_service.ingest import indexer as indexer_module
from rag_service.ingest.indexer import Indexer
from rag_service.shutdown import Interrupted
from tests.integration.test_model_switch import (  # noqa: F401 (``indexed`` is a fixture)
    B,
    StopsAfter,
    _settings_row,
    _vectors_are,
    indexed,
    model_b,
)

C = "test/model-c"


class Counting(HashingEmbedder):
    """Model B (the hashing vectors rolled by one place), counting the texts it embeds."""

    def __init__(self, *, model_id: str = B, roll: int = 1) -> None:
        super().__init__(model_id=model_id)
        self.roll, self.texts = roll, 0

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.texts += len(texts)
        return np.roll(super().embed_documents(texts), self.roll, axis=1)

    def embed_query(self, text: str) -> Any:
        return np.roll(super().embed_query(text), self.roll)


def _kept(db) -> dict[str, int]:
    with db.transaction() as session:
        rows = session.execute(text("SELECT model, count(*) FROM model_switch_vectors GROUP BY model")).all()
    return {model: count for model, count in rows}


@pytest.mark.parametrize("bulk", [False, True], ids=["row-path", "bulk"])
@pytest.mark.parametrize("stop", ["signal", "failure"])
def test_a_stopped_switch_resumes_without_embedding_again(indexed, bulk, stop, monkeypatch) -> None:  # noqa: F811
    db, settings = indexed
    if bulk:  # each collection one bulk load: a stop loses every row it wrote, not the vectors it embedded
        monkeypatch.setattr(indexer_module, "BULK_MIN_DOCUMENTS", 0)
    error: BaseException = KeyboardInterrupt() if stop == "signal" else RuntimeError("the model crashed")
    stopping = StopsAfter(model_b(), calls=2, error=error)  # 'alpha' (3 documents: two calls), then stops
    if stop == "signal":
        with pytest.raises(Interrupted):
            Indexer(db, stopping, settings).reindex_all(switch_model=True)
    else:
        assert not Indexer(db, stopping, settings).reindex_all(switch_model=True).ok
    assert _settings_row(db) == ("test/model-a", B)
    assert _kept(db) == {B: 3}

    counting = Counting()
    resumed = Indexer(db, counting, settings).reindex_all(switch_model=True)
    assert resumed.ok and resumed.updated == 5
    assert counting.texts == 2, "only the two texts the stopped run had not embedded"
    assert (resumed.chunks_embedded, resumed.embeddings_reused) == (2, 3)
    assert _settings_row(db) == (B, None) and _vectors_are(db, model_b())
    assert _kept(db) == {}, "the switch's end drops the kept vectors"


def test_a_switch_to_another_model_drops_the_vectors_kept_for_the_first(indexed) -> None:  # noqa: F811
    db, settings = indexed
    assert not Indexer(db, StopsAfter(model_b(), calls=1, error=RuntimeError("crash")), settings).reindex_all(
        switch_model=True
    ).ok
    assert _kept(db) == {B: 2}

    third = Counting(model_id=C, roll=2)
    assert not Indexer(db, StopsAfter(third, calls=1, error=RuntimeError("crash")), settings).reindex_all(
        switch_model=True
    ).ok
    assert _settings_row(db) == ("test/model-a", C)
    assert _kept(db) == {C: 2}, "B's vectors are of no use to a switch to C"

    finished = Counting(model_id=C, roll=2)
    assert Indexer(db, finished, settings).reindex_all(switch_model=True).ok
    assert finished.texts == 3 and _vectors_are(db, Counting(model_id=C, roll=2)) and _kept(db) == {}
