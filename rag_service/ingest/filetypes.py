"""Which files are indexed, how each kind is read, and which chunking strategy suits it.

One table per family of suffixes; ``recommend_strategy`` answers for a path, a suffix or a MIME type.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from rag_service.languages import ASCIIDOC_SUFFIXES, CODE_LANGUAGES, RST_SUFFIXES

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
HTML_SUFFIXES = (".html", ".htm")
PLAIN_SUFFIXES = (".txt", ".text")
JSON_SUFFIXES = (".json", ".jsonl")
YAML_SUFFIXES = (".yaml", ".yml")
LATEX_SUFFIXES = (".tex",)
PDF_SUFFIXES = (".pdf",)
DOCX_SUFFIXES = (".docx",)
PPTX_SUFFIXES = (".pptx",)
NOTEBOOK_SUFFIXES = (".ipynb",)
CODE_SUFFIXES = tuple(CODE_LANGUAGES)
#: what else a repository holds as text (configuration, styles, infrastructure, languages without definition
#: rules here): read as UTF-8, chunked by ``recursive`` (``.toml``, ``.ini``, ``.cfg``: ``config``). Not data dumps
#: (``.csv``, ``.xml``); ``.env`` files are hidden, so a folder's secrets are never read
REPOSITORY_TEXT_SUFFIXES = (
    ".toml", ".ini", ".cfg", ".conf", ".properties", ".css", ".scss", ".less", ".tf", ".hcl", ".graphql", ".gql",
    ".r", ".pl", ".pm", ".hs", ".dart", ".vue", ".svelte",
)  # fmt: skip
#: files known by their whole name (lower case), which have no suffix of their own: read as plain text
NAMED_TEXT_FILES = frozenset({
    "readme", "license", "licence", "copying", "notice", "authors", "contributors", "changelog", "changes",
    "contributing", "codeowners", "dockerfile", "containerfile", "makefile", "gnumakefile", "jenkinsfile",
    "vagrantfile", "gemfile", "rakefile", "procfile", "justfile",
})  # fmt: skip
#: files read as UTF-8 text (everything but PDF, DOCX, PPTX)
TEXT_SUFFIXES = (
    *MARKDOWN_SUFFIXES,
    *PLAIN_SUFFIXES,
    *RST_SUFFIXES,
    *ASCIIDOC_SUFFIXES,
    *HTML_SUFFIXES,
    *JSON_SUFFIXES,
    *YAML_SUFFIXES,
    *LATEX_SUFFIXES,
    *NOTEBOOK_SUFFIXES,
    *CODE_SUFFIXES,
    *REPOSITORY_TEXT_SUFFIXES,
)
SUPPORTED_SUFFIXES = (*TEXT_SUFFIXES, *PDF_SUFFIXES, *DOCX_SUFFIXES, *PPTX_SUFFIXES)
#: files whose stored text is not the file's own (extracted or converted): their chunks have no line numbers
CONVERTED_SUFFIXES = frozenset((*PDF_SUFFIXES, *DOCX_SUFFIXES, *PPTX_SUFFIXES, *HTML_SUFFIXES, *NOTEBOOK_SUFFIXES))
#: files stored as pages (a PDF's) or slides joined by a page break: their chunks carry ``page_start``/``page_end``
PAGED_SUFFIXES = frozenset((*PDF_SUFFIXES, *PPTX_SUFFIXES))

#: the strategy ``auto`` picks for each suffix; anything else gets ``recursive``
_BY_SUFFIX: dict[str, str] = {
    **dict.fromkeys(MARKDOWN_SUFFIXES, "markdown"),
    **dict.fromkeys(NOTEBOOK_SUFFIXES, "markdown"),  # markdown cells and fenced code cells
    **dict.fromkeys(DOCX_SUFFIXES, "markdown"),  # headings are written as ATX header lines
    **dict.fromkeys(PDF_SUFFIXES, "markdown"),  # so are a PDF's, from its outline or its fonts (``pdftext``)
    **dict.fromkeys(PPTX_SUFFIXES, "markdown"),  # and a slide's title (``pptxtext``)
    **dict.fromkeys(HTML_SUFFIXES, "html"),
    **dict.fromkeys(JSON_SUFFIXES, "json"),
    **dict.fromkeys(LATEX_SUFFIXES, "latex"),
    **dict.fromkeys(RST_SUFFIXES, "rst"),  # titles over adornment lines as headers (``rst_lines``)
    **dict.fromkeys(ASCIIDOC_SUFFIXES, "asciidoc"),  # ``== Title`` lines as headers (``asciidoc_lines``)
    **dict.fromkeys(CODE_SUFFIXES, "code"),
    **dict.fromkeys((".toml", *YAML_SUFFIXES), "config"),  # tables and keys as headers (``configfile``)
    **dict.fromkeys((".ini", ".cfg"), "config"),  # INI sections as headers (``setup.cfg > options``)
}
_MIME_TYPES: dict[str, str] = {
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/json": "json",
    "application/x-ndjson": "json",
    "application/jsonl": "json",
    "application/x-tex": "latex",
    "text/x-tex": "latex",
    "text/x-rst": "rst",
    "text/asciidoc": "asciidoc",
    "text/x-asciidoc": "asciidoc",
    "application/x-latex": "latex",
    "application/x-ipynb+json": "markdown",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "markdown",
    "application/pdf": "markdown",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "markdown",
    "text/x-python": "code",
    "text/x-script.python": "code",
    "application/javascript": "code",
    "text/javascript": "code",
    "application/typescript": "code",
    "text/x-go": "code",
    "text/x-java": "code",
    "text/x-java-source": "code",
    "text/x-rust": "code",
    "text/x-c": "code",
    "text/x-c++": "code",
    "text/x-csharp": "code",
    "text/x-ruby": "code",
    "application/x-httpd-php": "code",
    "text/x-kotlin": "code",
    "text/x-swift": "code",
    "text/x-scala": "code",
    "application/sql": "code",
    "text/x-sql": "code",
    "application/x-sh": "code",
    "text/x-shellscript": "code",
    "application/toml": "config",
    "application/yaml": "config",
    "application/x-yaml": "config",
    "text/yaml": "config",
    "text/x-yaml": "config",
}


def recommend_strategy(path_or_mime: str | PurePath) -> str:
    """The chunking strategy ``auto`` uses for a file path, a bare suffix (``".py"``) or a MIME type.

    Markdown, notebooks, Word, PowerPoint and PDF files -> ``markdown``; HTML -> ``html``; JSON/JSONL -> ``json``;
    LaTeX -> ``latex``; reStructuredText -> ``rst``; AsciiDoc -> ``asciidoc``; source code -> ``code``; TOML,
    YAML and INI (``.ini``, ``.cfg``) -> ``config``; everything else (text, ``.conf``, ``.properties``) ->
    ``recursive``.
    """
    value = str(path_or_mime).strip()
    if "/" in value and not isinstance(path_or_mime, PurePath):
        mime = value.split(";", 1)[0].strip().lower()
        if mime in _MIME_TYPES:
            return _MIME_TYPES[mime]
    # ``.yml`` is a bare suffix, ``.travis.yml`` a file's name
    bare = not isinstance(path_or_mime, PurePath) and value.startswith(".") and not {"/", "."} & set(value[1:])
    suffix = value.lower() if bare else PurePath(value).suffix.lower()
    return _BY_SUFFIX.get(suffix, "recursive")


def language_for(source: str) -> str:
    """The ``code`` strategy's language for a source path (``"text"`` when the suffix is not code)."""
    return CODE_LANGUAGES.get(PurePath(source).suffix.lower(), "text")


def file_suffix(path: PurePath) -> str:
    """The suffix ``path`` is read as: its own in lower case, ``.txt`` for a file known by name
    (``NAMED_TEXT_FILES``: ``Dockerfile``, ``Makefile``, ``LICENSE``, ...), else ``""``."""
    suffix = path.suffix.lower()
    return ".txt" if not suffix and path.name.lower() in NAMED_TEXT_FILES else suffix


def supported_kinds() -> str:
    """The supported suffixes and named files, for an error message."""
    return f"{' '.join(SUPPORTED_SUFFIXES)}, and by name (any case) {', '.join(sorted(NAMED_TEXT_FILES))}"


def unsupported_files(paths: Sequence[PurePath]) -> str:
    """One line: ``paths`` cannot be indexed for their type (``file_suffix`` not supported), and what can."""
    if len(paths) == 1:
        suffix = file_suffix(paths[0])
        kind = f"file type {suffix!r}" if suffix else "a file without a suffix"
        return f"cannot index {paths[0]}: {kind} is not supported; use {supported_kinds()}"
    names = ", ".join(str(p) for p in paths)
    return f"cannot index {names}: their file types are not supported; use {supported_kinds()}"
