"""Where a run finds vectors it need not embed again, by the hash of the text they embed.

``StoredVectors``: the chunks already stored (the collection's, then other collections'): an ingest's source.
``SwitchVectors``: what a switch of the embedding model has embedded so far (``db.switch_vectors``), kept as it is
made so that a switch stopped midway, whose writes are one transaction per collection, resumes where it stopped.
A plain ``rag reindex --all`` has no source: it embeds every text again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.orm import Session

from rag_service.db import documents as repo
from rag_service.db.database import Database
from rag_service.db.switch_vectors import keep_switch_vectors, switch_vectors
from rag_service.errors import DatabaseError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


class VectorSource(Protocol):
    """Vectors found by content hash, and the place a run's newly embedded ones are kept (if any)."""

    def look_up(self, session: Session, hashes: list[str]) -> dict[str, np.ndarray[Any, Any]]:
        """The vectors held for these hashes."""
        ...

    def keep(self, db: Database, vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        """Keep vectors just embedded, before the run writes them with their chunks."""
        ...


@dataclass(frozen=True, slots=True)
class StoredVectors:
    """The vectors of chunks stored already; new ones are kept by being written with their chunks."""

    collection: str

    def look_up(self, session: Session, hashes: list[str]) -> dict[str, np.ndarray[Any, Any]]:
        """The collection's stored vectors for ``hashes``, then another collection's (``repo.stored_embeddings``)."""
        return repo.stored_embeddings(session, collection=self.collection, hashes=hashes)

    def keep(self, db: Database, vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        """Nothing to do: the run writes them with their chunks."""


@dataclass(frozen=True, slots=True)
class SwitchVectors:
    """What the switch to ``model_id`` has embedded so far, committed as it is made."""

    model_id: str

    def look_up(self, session: Session, hashes: list[str]) -> dict[str, np.ndarray[Any, Any]]:
        """The vectors a run of this switch embedded already."""
        return switch_vectors(session, model_id=self.model_id, hashes=hashes)

    def keep(self, db: Database, vectors: dict[str, np.ndarray[Any, Any]]) -> None:
        """Commit ``vectors`` now, in a transaction of their own; a failure only costs a resumed run the work."""
        try:
            with db.transaction() as session:
                keep_switch_vectors(session, model_id=self.model_id, vectors=vectors)
        except DatabaseError as exc:  # the batch's own write meets the same outage and reports it
            log.debug("the switch's vectors were not kept: %s", exc)
