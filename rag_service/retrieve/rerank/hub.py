"""Finding model files: local paths, the Hugging Face cache, or a download that never hangs offline."""

from __future__ import annotations

import os
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from rag_service.errors import ModelLoadError, first_line
from rag_service.retrieve.rerank.base import FIX

PROBE_TIMEOUT_S = 3.0
DOWNLOAD_TIMEOUT_S = (3.0, 30.0)  # connect, between reads
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_T = TypeVar("_T")


def offline() -> bool:
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def probe(url: str) -> str | None:
    """``None`` when ``url``'s server answers at all (any HTTP status) within ``PROBE_TIMEOUT_S``, else why not.

    Runs in a daemon thread so that a name lookup that hangs (which socket timeouts do not cover)
    cannot hold the caller past the timeout either.
    """
    timeout = PROBE_TIMEOUT_S
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
                outcome.append(None)
        except urllib.error.HTTPError:
            outcome.append(None)
        except Exception as err:
            reason = getattr(err, "reason", err)
            outcome.append(first_line(reason, typed=True))

    worker = threading.Thread(target=attempt, name="rag-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


def resolve_source(name_or_path: str) -> str:
    """A local directory as a string, or a hub id; a path-like name that does not exist is an error."""
    local = Path(name_or_path).expanduser()
    if local.exists():
        if not local.is_dir():
            raise ModelLoadError(f"reranker model path {local} is not a directory; {FIX}")
        return str(local)
    if not _HUB_ID.match(name_or_path):
        raise ModelLoadError(f"reranker model path {local} does not exist; {FIX}")
    return name_or_path


def local_snapshot(source: str) -> Path | None:
    """``source``'s files on disk without loading anything: the directory, or its Hugging Face cache snapshot."""
    if Path(source).is_dir():
        return Path(source)
    from huggingface_hub import constants

    if not (Path(constants.HF_HUB_CACHE) / "--".join(["models", *source.split("/")])).is_dir():
        return None  # try_to_load_from_cache's own first answer, without importing its module (~0.25 s)
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(source, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def load_local_or_hub(name: str, source: str, load: Callable[[bool], _T]) -> _T:
    """Load from disk or the local cache; download only when online and the hub answers a probe."""
    _no_agent_lookup()
    if Path(source).is_dir():
        return load(True)
    try:
        return load(True)  # the local Hugging Face cache
    except OSError:
        pass  # not cached: download below if we may
    require_hub(name, source)
    return load(False)


def _no_agent_lookup() -> None:
    """Keep huggingface_hub (>= 2.4) from asking the hub for its agent registry, unless the user chose.

    The first time a process builds request headers, even to read the local cache, it fetches that registry
    with a 3 s timeout: a model cached here took 3 s more to load when the hub was unreachable, before our
    probe could say so. Its telemetry switch (``HF_HUB_DISABLE_TELEMETRY``) turns the lookup off.
    """
    if "HF_HUB_DISABLE_TELEMETRY" not in os.environ:
        from huggingface_hub import constants

        constants.HF_HUB_DISABLE_TELEMETRY = True


def require_hub(name: str, source: str) -> None:
    """Raise the one-line ``ModelLoadError`` when ``source`` cannot be downloaded (offline, hub unreachable)."""
    if offline():
        raise ModelLoadError(
            f"reranker model {name!r} is neither a local directory nor in the Hugging Face cache, and "
            f"offline mode is on (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): download it once online, or {FIX}"
        )
    endpoint = hub_endpoint()
    reason = probe(f"{endpoint}/api/models/{source}")
    if reason is not None:
        raise ModelLoadError(
            f"reranker model {name!r} is not cached and {endpoint} is unreachable ({reason}); "
            f"download it once online, or {FIX}"
        )


@contextmanager
def load_errors(model: str, *, hint: str = FIX) -> Iterator[None]:
    """Turn any failure while loading into a one-line ``ModelLoadError`` naming the model."""
    try:
        yield
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(f"cannot load reranker model {model}: {first_line(err, typed=True)}; {hint}") from err
