"""Which language a file's suffix names: the ``code`` strategy's rules (``ingest/filetypes.py``) and the fence a
code result's text is shown in (``fences.py``). A leaf module: ingestion and retrieval both read it."""

from __future__ import annotations

from pathlib import PurePath
from typing import Literal

#: source-code suffix -> language name used by the ``code`` strategy
CODE_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "js",
    ".mjs": "js",
    ".cjs": "js",
    ".jsx": "js",
    ".ts": "ts",
    ".tsx": "ts",
    ".go": "go",
    ".java": "java",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".swift": "swift",
    ".scala": "scala",
    ".sql": "sql",
    ".sh": "shell",
    ".bash": "shell",
    ".proto": "proto",
    ".lua": "lua",
    ".ex": "elixir",
    ".exs": "elixir",
    ".ps1": "powershell",
    ".sol": "sol",
}
#: configuration and data suffixes shown fenced (and cited by line) like code, with the fence's language
CONFIG_LANGUAGES: dict[str, str] = {
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".ini": "ini",
    ".cfg": "ini",
    ".json": "json",
    ".jsonl": "json",
}


#: prose formats that are no markdown: their text has titles underlined with ``~~~~`` and no fences
RST_SUFFIXES = (".rst", ".rest")
#: ``.asc`` is PGP armour too (keys, signatures): the loader reads such a file as no document (``loaders``)
ASCIIDOC_SUFFIXES = (".adoc", ".asciidoc", ".asc")


def markup_of(source: str) -> Literal["rst", "asciidoc"] | None:
    """``rst`` or ``asciidoc`` for a source path in those formats, else None (their text has no markdown fences, a
    ``~~~~`` line under a title is its underline; includes are theirs; their sections are numbered at their titles)."""
    name = source.lower()
    return "rst" if name.endswith(RST_SUFFIXES) else "asciidoc" if name.endswith(ASCIIDOC_SUFFIXES) else None


def fence_language(source: str) -> str | None:
    """The fence language of a source path whose text is code or configuration, else None (prose)."""
    suffix = PurePath(source).suffix.lower()
    return CODE_LANGUAGES.get(suffix) or CONFIG_LANGUAGES.get(suffix)
