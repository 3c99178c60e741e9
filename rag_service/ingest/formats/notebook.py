"""Jupyter notebooks (.ipynb): markdown cells as they are, code cells as fenced code; outputs left out."""

from __future__ import annotations

import json
from pathlib import Path

from rag_service.errors import DocumentReadError


def read_notebook(path: Path, text: str) -> str:
    """The cells of the notebook JSON ``text`` joined by blank lines.

    Raises DocumentReadError for JSON that is not a notebook.
    """
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as err:
        raise DocumentReadError(
            f"{path} is not valid JSON (line {err.lineno} column {err.colno}: {err.msg}); fix the notebook file"
        ) from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise DocumentReadError(f"{path} has no 'cells' list, so it is not a Jupyter notebook (nbformat 4)")
    metadata = notebook.get("metadata")
    kernel = metadata.get("kernelspec") if isinstance(metadata, dict) else None
    language = str(kernel.get("language") or "python") if isinstance(kernel, dict) else "python"
    blocks: list[str] = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", "")
        body = "".join(source) if isinstance(source, list) else str(source)
        body = body.replace("\r\n", "\n").strip("\n")
        if not body.strip():
            continue
        if cell.get("cell_type") == "code":
            fence = "````" if "```" in body else "```"
            blocks.append(f"{fence}{language}\n{body}\n{fence}")
        elif cell.get("cell_type") == "markdown":
            blocks.append(body)
    return "\n\n".join(blocks)
