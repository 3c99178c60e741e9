"""Where servers before this one kept uploaded files; the upload handling itself is ``rag_service.uploads``."""

from __future__ import annotations

from rag_service.uploads import collection_folder, forget_upload

__all__ = ["collection_folder", "forget_upload"]
