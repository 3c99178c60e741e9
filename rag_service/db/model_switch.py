"""Switching the stored vectors to another embedding model (``rag reindex --all``).

A switch is the pair (from, to) in ``index_settings`` (``embedding_model``, ``switching_to``, migration
0008). ``begin_model_switch`` records it, committed before the first re-embedded vector is written;
while it is recorded the database holds vectors of both models, so reads and ordinary writes refuse
(``index_settings.check_stored_model``). ``end_model_switch`` stores ``to`` as the model and clears
the marker in one statement, once every document of every collection was re-embedded without a
failure; a run that stops or fails leaves the marker, and ``rag reindex --all`` again finishes it, reusing the
vectors the stopped run embedded (``db.switch_vectors``).

Every batch of vectors is written after ``check_vectors_writable`` in the batch's own transaction: it
holds the settings row shared, so the marker's update waits for batches in flight and every batch
after it sees the marker. An ingest that started with the old model therefore writes no vector
after a switch began, and ``rag reindex --all`` lists the collections only after recording it.

A model of another dimension opens the vector columns in the transaction that records the switch and closes
them, with the new dimension and rebuilt vector indexes, in the one that ends it (``db.vector_columns``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from rag_service.db.index_settings import check_dimension, fts_mismatch_message, unfinished_switch_message
from rag_service.db.models import IndexSettings
from rag_service.db.switch_vectors import drop_switch_vectors
from rag_service.db.vector_columns import close_vector_columns, open_vector_columns, schema_embedding_dim
from rag_service.errors import EmbeddingMismatchError


@dataclass(frozen=True, slots=True)
class ModelSwitch:
    """A switch of every stored vector from ``from_model`` to ``to_model``."""

    from_model: str
    to_model: str
    #: the vector columns are open for a model of another dimension: no HNSW index until the switch ends
    resizes: bool = False

    def unfinished(self) -> str:
        """The report's line while (or after) a run that did not re-embed every document."""
        return (
            f"embedding model: the switch from {self.from_model!r} to {self.to_model!r} is unfinished "
            "(reads and ordinary writes refuse until it is); run `rag reindex --all` again to finish it"
        )

    def finished(self) -> str:
        """The report's line once every collection holds vectors of ``to_model`` alone."""
        return f"embedding model: switched from {self.from_model!r} to {self.to_model!r}; every collection re-embedded"


def begin_model_switch(
    session: Session, *, model_id: str, dim: int, fts_config: str, every_collection: bool
) -> ModelSwitch | None:
    """Record a switch to ``model_id`` unless every stored vector is of it already (then None: a plain reindex).

    A switch under way to ``model_id`` is resumed; one under way to another model turns to
    ``model_id`` (back to where it came from, or on to a third model). A switch re-embeds every
    collection, so one asked of a single collection (``every_collection`` False) is refused; so is
    another text-search config. A model of another dimension opens the vector columns (``db.vector_columns``).
    """
    stored = _settings_row(session, lock="update")
    if stored is None:  # nothing written yet: the first write sizes the vector columns (``db.vector_columns``)
        return None
    if stored.switching_to is None and stored.embedding_model == model_id:
        check_dimension(session, model_id=model_id, dim=dim)
        return None
    if stored.fts_config != fts_config:
        raise EmbeddingMismatchError(fts_mismatch_message(stored.fts_config, fts_config))
    if stored.switching_to in (None, model_id):
        switch = ModelSwitch(stored.embedding_model, model_id)
    elif stored.embedding_model == model_id:  # back to the model the unfinished switch came from
        switch = ModelSwitch(stored.switching_to, model_id)
    else:
        switch = ModelSwitch(stored.embedding_model, model_id)
    if not every_collection:
        raise EmbeddingMismatchError(
            f"switching the embedding model from {switch.from_model!r} to {switch.to_model!r} re-embeds every "
            "collection; run `rag reindex --all` without --collection"
        )
    column_dim = schema_embedding_dim(session)  # None: open already, by an unfinished switch of dimension
    if column_dim not in (None, dim):
        open_vector_columns(session, model_id=model_id, dim=dim)
    stored.embedding_model, stored.switching_to = switch.from_model, switch.to_model
    drop_switch_vectors(session, except_model=switch.to_model)  # a resumed switch keeps what it embedded
    session.flush()
    return replace(switch, resizes=column_dim != dim)


def end_model_switch(
    session: Session, switch: ModelSwitch, *, dim: int, phase: Callable[[str], None] = lambda _: None
) -> bool:
    """Store ``switch.to_model`` (``dim``-d) as the model of every vector and clear the marker (the caller's
    transaction); open vector columns get ``dim`` dimensions and their indexes back (``phase`` hears each step).

    Call only after every document of every collection was re-embedded with no failure. False (and
    nothing changed) when another run has turned the switch to another model meanwhile.
    """
    stored = _settings_row(session, lock="update")
    if stored is None or stored.switching_to != switch.to_model:
        return False
    close_vector_columns(session, dim=dim, phase=phase)
    stored.embedding_model, stored.switching_to = switch.to_model, None
    drop_switch_vectors(session)
    session.flush()
    return True


def check_vectors_writable(session: Session, *, model_id: str) -> None:
    """Raise EmbeddingMismatchError unless vectors of ``model_id`` may be written in this transaction.

    They may where the stored model is ``model_id`` and no switch is under way, or a switch to
    ``model_id`` is (its ``rag reindex --all`` is the only run that gets this far: the others are
    refused at their start). Holds the settings row shared until the transaction ends.
    """
    stored = _settings_row(session, lock="share")
    if stored is None or (stored.switching_to or stored.embedding_model) == model_id:
        return
    if stored.switching_to is not None:
        raise EmbeddingMismatchError(unfinished_switch_message(stored.embedding_model, stored.switching_to))
    raise EmbeddingMismatchError(
        f"this database holds vectors of {stored.embedding_model!r} but this run embeds with {model_id!r}; "
        "run `rag reindex --all` to re-embed every collection with it"
    )


def _settings_row(session: Session, *, lock: Literal["update", "share"]) -> IndexSettings | None:
    """The settings row, read afresh and locked until the transaction ends (``share``: against its update)."""
    query = select(IndexSettings).where(IndexSettings.id == 1).with_for_update(read=lock == "share")
    return session.execute(query.execution_options(populate_existing=True)).scalar_one_or_none()
