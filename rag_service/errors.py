"""Every error rag_service raises on purpose, as one tree.

    RagError                      base of all; ``str(err)`` is a one-line message naming input and fix
    ├── ConfigurationError        a setting, preset or per-call override is invalid
    │   ├── UnknownContextError   ``context=`` names no row of ``rag_configurations``
    │   ├── UnknownFilterError    a filter key is not one of the supported ones
    │   └── UnknownCollectionError  a read names a collection that holds no documents
    ├── QueryError                the query text cannot be searched (empty, ...)
    ├── DatabaseError             the database cannot be reached or is not usable
    │   ├── DatabaseUnavailableError  connection refused / lost; retryable
    │   │   └── LockLostError     a run's collection lock ended under it (a restart): the run stopped writing
    │   ├── PoolExhaustedError    every pooled connection stayed in use for the pool's timeout; retryable
    │   ├── StatementTimeoutError a statement ran past ``RAG_STATEMENT_TIMEOUT_MS`` and was cancelled
    │   ├── DiskFullError         the server had no disk space left for a write (rolled back)
    │   ├── SchemaError           the schema is missing or not at the migration head
    │   │   └── ExtensionMissingError  pgvector is not installed, or the role may not CREATE EXTENSION vector
    │   └── EmbeddingMismatchError   stored vectors come from another model or dimension
    ├── IngestError               a document could not be read or indexed
    │   ├── UnsupportedFileError  the file type has no loader
    │   └── DocumentReadError     unreadable, not valid UTF-8, binary, too large
    │       └── GeneratedFileError  minified or generated code: not indexed on purpose (a run reports it skipped)
    ├── ChunkingError             invalid chunker settings (unknown strategy, overlap >= size)
    ├── ReindexInProgressError    another reindex holds this collection's lock
    ├── ModelLoadError            an embedding or reranking model cannot be loaded
    ├── LLMError                  the LLM endpoint timed out, failed or answered nonsense (stages degrade)
    └── MissingExtraError         an optional integration's framework is not installed (also an ImportError)

The CLI turns any ``RagError`` into ``error: <message>`` and exit status 1. ``first_line(exc)`` is how
any other exception shows inside such a message.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RagError(Exception):
    """Base class: a failure the user can act on; the message says how."""


class ConfigurationError(RagError, ValueError):
    """A setting, preset value or override is invalid."""


class UnknownContextError(ConfigurationError):
    """The context name is not a row of ``rag_configurations``."""


class UnknownFilterError(ConfigurationError):
    """A filter key is not supported."""


class UnknownCollectionError(ConfigurationError):
    """A read (retrieve, reindex, metadata, graph) names a collection that holds no documents.

    Indexing into a new collection creates it; only reads refuse an unknown name. ``existing`` lists
    the collections that do exist, for callers that show them differently.
    """

    def __init__(self, message: str, *, collection: str, existing: list[str]) -> None:
        super().__init__(message)
        self.collection = collection
        self.existing = existing


class QueryError(RagError, ValueError):
    """The query cannot be searched."""


class DatabaseError(RagError):
    """The database is unreachable or unusable."""


class DatabaseUnavailableError(DatabaseError):
    """The connection failed or was lost; retrying later may succeed."""

    retryable = True


class NodeUnavailableError(DatabaseUnavailableError):
    """The database answered, but a node it reaches for the data did not (a Citus worker down): the calls that
    need that node fail, the others are served, so it does not count against the database's circuit breaker."""


class LockLostError(DatabaseUnavailableError):
    """An ingest or reindex lost its collection's lock mid-run (the database restarted, or ended the lock's
    session); it stopped before writing on unprotected. What it committed stays; running it again finishes it."""


class PoolExhaustedError(DatabaseError):
    """No pooled connection came free within the pool's timeout (``RAG_POOL_SIZE`` + ``RAG_POOL_MAX_OVERFLOW`` all in
    use); the database itself may be fine, so this opens no circuit. Retrying later may succeed."""

    retryable = True


class StatementTimeoutError(DatabaseError):
    """A statement ran longer than ``RAG_STATEMENT_TIMEOUT_MS`` (or waited that long for a lock)."""


class DiskFullError(DatabaseError):
    """The server could not write: its data directory's disk is full (SQLSTATE 53100); the write was rolled back."""


class SchemaError(DatabaseError):
    """The schema is missing or behind the code's migrations."""


class ExtensionMissingError(SchemaError):
    """``CREATE EXTENSION vector`` failed: pgvector is missing on the server or the role lacks the right."""


class EmbeddingMismatchError(DatabaseError):
    """The database holds vectors of another embedding model or dimension."""


class IngestError(RagError):
    """A document could not be indexed."""


class UnsupportedFileError(IngestError):
    """No loader exists for this file type."""


class DocumentReadError(IngestError):
    """The file is unreadable, binary, badly encoded or too large."""


class GeneratedFileError(DocumentReadError):
    """The file is minified or generated code, or no document though its name says one (PGP armour named ``.asc``):
    read, and left out on purpose. ``load_document`` raises it as it raises any DocumentReadError; an indexing run
    reports the file as skipped with this reason, not as failed."""


class ChunkingError(RagError, ValueError):
    """Chunker settings are invalid."""


class ReindexInProgressError(RagError):
    """Another reindex of the same collection is running."""


class ModelLoadError(RagError):
    """A model could not be loaded from its name or path."""


class LLMError(RagError):
    """The LLM endpoint (``RAG_LLM_BASE_URL``) did not give a usable answer; callers degrade the stage."""


class MissingExtraError(RagError, ImportError):
    """An optional integration needs a package that is not installed; the message names the extra."""


def closest_name(name: str, names: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The one of ``names`` a mistyped ``name`` most likely meant (for "did you mean"): the same name but for
    case, else difflib's closest above ``cutoff``, compared case-blind; None when none is close."""
    if len(name) > 200:  # no typo of a name; and difflib's cost grows with the length
        return None
    folded = {known.casefold(): known for known in names}
    if name.casefold() in folded:
        return folded[name.casefold()]
    close = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=cutoff)
    return folded[close[0]] if close else None


def did_you_mean(name: str, names: Iterable[str], *, cutoff: float = 0.6, quoted: bool = True) -> str:
    """``"did you mean 'x'? "`` for the ``closest_name`` of ``name``, else ``""``: the hint of an unknown-name error."""
    near = closest_name(name, names, cutoff=cutoff)
    return "" if near is None else f"did you mean {near!r}? " if quoted else f"did you mean {near}? "


#: longest part of a name (a collection's, a preset's, a field's) an error shows: a 200-character name in every
#: message made it unreadable, a 100 KB one flooded an agent's context
SHOWN_NAME_CHARS = 60


def shown_name(name: str) -> str:
    """``name`` quoted for an error line, cut to ``SHOWN_NAME_CHARS`` characters with an ellipsis."""
    return repr(name if len(name) <= SHOWN_NAME_CHARS else name[: SHOWN_NAME_CHARS - 1] + "\u2026")


def first_line(exc: object, *, limit: int = 300, typed: bool = False) -> str:
    """How another library's exception shows inside one of our one-line messages.

    The first line of its message, stripped and cut to ``limit`` characters (a driver error wrapped
    by SQLAlchemy shows the driver's message, its ``orig``, without the statement dump); the type's
    name when the message is blank. ``typed`` puts the type's name first: ``"OSError: no such file"``.
    """
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip()
    line = text.splitlines()[0][:limit] if text else ""
    name = type(inner).__name__
    if typed:
        return f"{name}: {line}" if line else name
    return line or name
