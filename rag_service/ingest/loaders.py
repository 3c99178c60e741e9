"""Reading files into text: which files, how they are decoded, and what counts as their title.

The stored text is the normalised text (decoded by ``textdecode``: UTF-8, UTF-16/32 with a byte-order
mark, or HTML in the charset it declares; the BOM removed, ``\\r\\n`` and lone ``\\r`` turned into
``\\n``), HTML reduced to its visible text with headings as ATX header lines and ``<pre>`` fenced, PDF and
Word files to their extracted text, notebooks to their cells; every chunk offset refers to it. JSON is checked to
parse, and minified or generated code and style sheets are refused (``minified``).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag_service.asciidoc_lines import asciidoc_title
from rag_service.errors import DocumentReadError, GeneratedFileError, RagError, UnsupportedFileError, first_line
from rag_service.ingest.filetypes import (
    CODE_SUFFIXES,
    DOCX_SUFFIXES,
    HTML_SUFFIXES,
    JSON_SUFFIXES,
    LATEX_SUFFIXES,
    MARKDOWN_SUFFIXES,
    NOTEBOOK_SUFFIXES,
    PDF_SUFFIXES,
    PPTX_SUFFIXES,
    SUPPORTED_SUFFIXES,
    file_suffix,
    supported_kinds,
    unsupported_files,
)
from rag_service.ingest.formats.docxtext import read_docx
from rag_service.ingest.formats.htmltext import html_to_text
from rag_service.ingest.formats.notebook import read_notebook
from rag_service.ingest.formats.pdftext import read_pdf
from rag_service.ingest.formats.pptxtext import read_pptx
from rag_service.ingest.formats.textdecode import decode_text, normalise_text
from rag_service.ingest.jsonchunk import depth_problem
from rag_service.ingest.latex import latex_title
from rag_service.ingest.minified import STYLE_SUFFIXES, check_not_minified
from rag_service.ingest.passed_over import GitIgnores, kind_by_name
from rag_service.ingest.report import SUPPORTED_TAIL
from rag_service.languages import ASCIIDOC_SUFFIXES, RST_SUFFIXES
from rag_service.markdown_lines import find_front_matter, scan_lines
from rag_service.rst_lines import rst_title

__all__ = [
    "HTML_SUFFIXES",
    "MARKDOWN_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "Discovery",
    "LoadedDocument",
    "discover",
    "html_to_text",  # re-exported from htmltext
    "load_document",
    "markdown_title",
    "text_title",
]


@dataclass(slots=True)
class LoadedDocument:
    """One file's normalised text, ready to chunk; ``source`` is the path as given."""

    source: str
    text: str
    title: str


def load_document(path: Path, *, max_bytes: int) -> LoadedDocument:
    """Read ``path`` into its stored text (see the module doc) with a title.

    Raises UnsupportedFileError for a suffix not in ``SUPPORTED_SUFFIXES`` and DocumentReadError for
    a file that is missing, unreadable, larger than ``max_bytes`` (or whose text is), binary (NUL bytes), not UTF-8
    (nor UTF-16/32 with a byte-order mark), malformed (JSON, notebook, PDF, Word), without a text
    layer (scanned PDF), encrypted, or minified code.
    """
    suffix = file_suffix(path)
    if suffix not in SUPPORTED_SUFFIXES:
        raise UnsupportedFileError(unsupported_files([path]))
    data = _read_bytes(path, max_bytes=max_bytes)
    try:
        text, title = _read(path, suffix, data, max_bytes=max_bytes)
    except RagError:
        raise
    except Exception as exc:  # a reader's failure we did not foresee is still this file's alone, with its type
        raise DocumentReadError(
            f"{path} could not be read ({first_line(exc, typed=True, limit=120)}): an error of rag_service's reader, "
            "not one it knows in files; convert or re-save the file, and report the error"
        ) from exc
    if len(text) > max_bytes:  # a .docx or a PDF unpacks: the limit holds for the text stored, not the file alone
        raise DocumentReadError(
            f"{path} holds {len(text):,} characters of text, over the limit of {max_bytes:,} (RAG_MAX_FILE_BYTES); "
            "set it higher to index it"
        )
    return LoadedDocument(source=str(path), text=text, title=title or path.stem)


def _read(path: Path, suffix: str, data: bytes, *, max_bytes: int) -> tuple[str, str]:
    """The stored text of a file's ``data`` and its title (``""`` when it has none)."""
    if suffix in PDF_SUFFIXES:
        return read_pdf(path, data, max_bytes=max_bytes)
    if suffix in DOCX_SUFFIXES:
        return read_docx(path, data, max_bytes=max_bytes)
    if suffix in PPTX_SUFFIXES:
        return read_pptx(path, data, max_bytes=max_bytes)
    text = decode_text(path, data, markup=suffix in HTML_SUFFIXES)
    title = ""
    if suffix in HTML_SUFFIXES:
        text, title = _html_document(text)
    elif suffix in MARKDOWN_SUFFIXES:
        title = markdown_title(text)
    elif suffix in NOTEBOOK_SUFFIXES:
        text = read_notebook(path, text)
        title = markdown_title(text)
    elif suffix in JSON_SUFFIXES:
        _check_json(path, text, lines=suffix == ".jsonl")
    elif suffix in CODE_SUFFIXES or suffix in STYLE_SUFFIXES:
        check_not_minified(path, text)
    elif suffix in LATEX_SUFFIXES:
        title = latex_title(text)
    elif suffix in RST_SUFFIXES:
        title = rst_title(text)
    elif suffix in ASCIIDOC_SUFFIXES:
        if _PGP_ARMOUR.match(text.lstrip()):  # a document showing a key in a listing block is still read
            raise GeneratedFileError(f"{path} is PGP armour (-----BEGIN PGP ...), not AsciiDoc: it is not indexed")
        title = asciidoc_title(text)
    return text, title


def _check_json(path: Path, text: str, *, lines: bool) -> None:
    """Raise DocumentReadError naming the first syntax error of a JSON (or JSON Lines) file, or where it nests
    deeper than the ``json`` strategy reads (``MAX_JSON_DEPTH``). Blank is an empty document, as elsewhere."""
    documents = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()] if lines else [(1, text)]
    for first, document in documents:
        if not document.strip():
            continue
        try:
            json.loads(document)
        except json.JSONDecodeError as err:
            raise DocumentReadError(
                f"{path} is not valid JSON (line {first + err.lineno - 1} column {err.colno}: {err.msg}); "
                "fix the syntax"
            ) from None
        except RecursionError:  # deeper than Python's parser goes: past the limit below, which says where
            break
    if too_deep := depth_problem(text):
        raise DocumentReadError(f"{path} is {too_deep}; flatten it")


def _read_bytes(path: Path, *, max_bytes: int) -> bytes:
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise DocumentReadError(f"cannot read {path}: it is a directory; pass the files in it")
        if not stat.S_ISREG(info.st_mode):
            raise DocumentReadError(f"cannot read {path}: not a regular file; pass a text file")
        if info.st_size > max_bytes:
            raise _too_large(path, info.st_size, max_bytes)
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except FileNotFoundError:
        raise DocumentReadError(f"cannot read {path}: file does not exist; check the path") from None
    except OSError as err:
        raise DocumentReadError(
            f"cannot read {path}: {err.strerror or err}; check that it exists and is readable"
        ) from None
    if len(data) > max_bytes:  # the file grew after stat
        raise _too_large(path, len(data), max_bytes)
    return data


def _too_large(path: Path, size: int, max_bytes: int) -> DocumentReadError:
    return DocumentReadError(
        f"{path} is {size:,} bytes, over the limit of {max_bytes:,} bytes; set RAG_MAX_FILE_BYTES higher to index it"
    )


#: a PGP key or signature, which ``.asc`` names as often as AsciiDoc (the Pro Git book's chapters): never indexed
_PGP_ARMOUR = re.compile(r"-----BEGIN PGP [A-Z ]+-----")
#: the ``title:`` line of YAML front matter
_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def front_matter_title(text: str) -> str:
    """The ``title:`` of the YAML front matter the text starts with (quotes removed), or ``""``."""
    block = find_front_matter(text)
    found = _FRONT_MATTER_TITLE.search(text, block.body_start, block.body_end) if block else None
    return found[1].strip().strip("\"'").strip() if found else ""


def markdown_title(text: str) -> str:
    """The first h1 outside fenced code (``# Title``, or ``Title`` over a ``===`` underline), else the front
    matter's ``title:``, else ``""``."""
    lines = scan_lines(text)  # stops at the h1: most files start with it
    h1 = next((line.header.title for line in lines if line.header is not None and line.header.level == 1), "")
    return h1 or front_matter_title(text)


#: a tag of a document's body: a text given for the ``html`` strategy holding one is markup, not converted text
_MARKUP = re.compile(r"<(?:html|body|head|h[1-6]|p|div|section|article|main|table|ul|ol|pre|br)\b", re.IGNORECASE)


def given_text(text: str, strategy: str) -> tuple[str, str]:
    """A text given (not read from a file) as a file of its kind would be stored: normalised as a decoded file is
    (a leading BOM dropped, else ``# Title`` on the first line is no header; line endings as ``\\n``); for the
    ``html`` strategy, markup becomes its visible text with ATX headings, and its ``<title>`` the title (it was
    stored and shown with its tags, as one chunk); any other text with no title. Converted text has no tags."""
    if not isinstance(text, str):  # refused later, by the batch
        return text, ""
    text = normalise_text(text)
    if strategy != "html" or not _MARKUP.search(text):
        return text, ""
    return _html_document(text)


def _html_document(html: str) -> tuple[str, str]:
    """The stored text of HTML markup and its title: ``<title>``, else the text's first heading."""
    text, title = html_to_text(html)
    return text, title or markdown_title(text)


def text_title(text: str, strategy: str) -> str:
    """The title a text given without one carries itself, read as a file chunked by ``strategy`` would be:
    ``\\title{}`` for LaTeX, a lone first-level title for reStructuredText, ``= Title`` for AsciiDoc, none for code
    and JSON (a ``# comment`` is no title), else ``markdown_title``."""
    if strategy == "latex":
        return latex_title(text)
    if strategy == "rst":
        return rst_title(text)
    if strategy == "asciidoc":
        return asciidoc_title(text)
    return "" if strategy in ("code", "json") else markdown_title(text)


@dataclass(slots=True)
class Discovery:
    """What ``discover`` found: supported files, skipped paths with reasons, and folders it could not read; what
    its walks passed over on purpose by kind (``passed_over``), and why git could not say what it ignores.

    Documents below an unreadable folder were not seen, so a prune must leave them alone.
    """

    files: list[Path]
    skipped: list[tuple[Path, str]]
    unreadable: list[Path]
    passed_over: dict[str, list[Path]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def discover(paths: Sequence[Path]) -> Discovery:
    """Expand ``paths`` (directories recursively, sorted) into supported files and skipped ones.

    Hidden files and directories and ``__pycache__`` inside directories are passed over silently; what git
    ignores, ``node_modules``, virtualenvs and lock files (``passed_over``) are passed over and listed by kind.
    A path given explicitly is always considered (a folder git ignores is read whole). A followed link is its
    target's file (as ``source_for`` keys it): listed by the target's path, so its suffix and name, not the
    link's, decide how it is read. A folder that cannot be listed (permissions, a path too long, removed
    meanwhile) is skipped with the reason and listed in ``unreadable``.
    """
    found = Discovery([], [], [])
    seen: set[Path] = set()

    def consider(path: Path) -> None:
        if (key := path.resolve()) in seen:  # one file named twice (a link to it, another spelling)
            return
        seen.add(key)
        suffix = file_suffix(path)
        if suffix in SUPPORTED_SUFFIXES:
            found.files.append(path)
        else:
            kind = f"unsupported file type {suffix!r}" if suffix else "no file suffix"
            found.skipped.append((path, f"{kind}{SUPPORTED_TAIL}{supported_kinds()}"))

    for path in paths:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            found.skipped.append((path, "does not exist"))
            continue
        except OSError as exc:  # a folder above it cannot be searched, or the path is too long
            found.unreadable.append(path)
            found.skipped.append((path, _unreadable_reason(exc, "path")))
            continue
        if stat.S_ISDIR(mode):
            ignores = GitIgnores()
            walked, errors = _walk(path, ignores, found.passed_over)
            found.problems += ignores.problems
            inside = path.resolve()
            met: dict[Path, str | None] = {}  # each file by the path it is read by, and why it is skipped
            for file in walked:
                left = _link_not_followed(file, inside)
                read_by = file if left is not None else _read_by(file, path, inside)
                if left is None and file.is_symlink() and _passed_over_below(read_by, path, ignores):
                    left = f"a symbolic link to {file.resolve()}, which a walk passes over (git ignores it, or it is "
                    left += "vendored, a virtualenv or a lock file): not followed; name that file to index it"
                    read_by = file
                met.setdefault(read_by, left)
            for file, left in sorted(met.items()):
                if left is None:
                    consider(file)
                elif left:
                    found.skipped.append((file, left))
            for error in errors:
                folder = Path(error.filename) if error.filename is not None else path
                found.unreadable.append(folder)
                found.skipped.append((folder, _unreadable_reason(error, "folder")))
        elif stat.S_ISREG(mode):
            consider(path.resolve() if path.is_symlink() else path)
        else:
            found.skipped.append((path, "not a regular file"))
    return found


def _walk(root: Path, ignores: GitIgnores, passed: dict[str, list[Path]]) -> tuple[list[Path], list[OSError]]:
    """Every file below ``root`` but hidden ones and those passed over (each added to ``passed`` by kind), and the
    links to folders (``os.walk`` does not enter them). ``ignores`` learns what git ignores in each checkout met."""
    found: list[Path] = []
    errors: list[OSError] = []

    def kept(directory: str, name: str, *, folder: bool) -> bool:
        if _passed_over(name, folder=folder):
            return False  # hidden, __pycache__: silently
        path = Path(directory, name)
        kind = ignores.kind(path, folder=folder) or kind_by_name(directory, name, folder=folder)
        if kind is not None:
            passed.setdefault(kind, []).append(path)
        return kind is None

    ignores.ask(root)
    for directory, dirnames, filenames in os.walk(root, onerror=errors.append):
        if directory != str(root) and ".git" in dirnames + filenames:  # a nested checkout, a submodule
            ignores.ask(Path(directory))
        dirnames[:] = [d for d in dirnames if kept(directory, d, folder=True)]
        found.extend(Path(directory, d) for d in dirnames if os.path.islink(os.path.join(directory, d)))
        found.extend(Path(directory, name) for name in filenames if kept(directory, name, folder=False))
    return found, errors


def _passed_over(name: str, *, folder: bool) -> bool:
    """Whether a walk leaves out a file or folder of this name: hidden ones, and ``__pycache__`` folders."""
    return name.startswith(".") or (folder and name == "__pycache__")


def _passed_over_below(path: Path, root: Path, ignores: GitIgnores) -> bool:
    """Whether a walk over ``root`` passes over ``path`` (spelled below it) by what git ignores or by a name."""
    names = path.relative_to(root).parts
    folders = [kind_by_name(root.joinpath(*names[:i]), name, folder=True) for i, name in enumerate(names[:-1])]
    return ignores.below(path, root) or any(folders) or kind_by_name(path.parent, path.name, folder=False) is not None


def _read_by(file: Path, root: Path, inside: Path) -> Path:
    """The path a walk over ``root`` (resolved: ``inside``) reads ``file`` by: a followed link's target, spelled
    below ``root`` as the walk spells its files; any other file itself."""
    return root / file.resolve().relative_to(inside) if file.is_symlink() else file


def _link_not_followed(path: Path, root: Path) -> str | None:
    """Why a walk over ``root`` (resolved) does not follow the symbolic link ``path``, or None: it is not a link,
    or a link to a file inside ``root`` the walk reads. A link out of the folder would index, and let anyone who
    may search read, a file the user never named (``/etc/passwd`` under ``docs/``); one to a hidden file, a file
    the walk never reads (``settings.toml -> .env``). ``""``: a link to a folder inside ``root``, which the walk
    reads where it is: left out without a word (openshift-docs keeps such links in every assembly folder, and each
    was a line saying to name a folder that was indexed in the same run, audit 59b)."""
    if not path.is_symlink():
        return None
    try:
        target = path.resolve()
        mode = target.stat().st_mode
    except PermissionError:  # /proc/1/cwd, a folder of another user: its kind cannot be known
        return f"a symbolic link to {os.readlink(path)}, which cannot be looked at (permission denied): not followed"
    except FileNotFoundError:
        return f"a symbolic link to {target}, which does not exist: mend or remove the link"
    except (RuntimeError, OSError):  # a loop: Python 3.11 raises RuntimeError, later ones OSError
        return f"a symbolic link that leads back to itself ({os.readlink(path)}): mend or remove the link"
    if stat.S_ISDIR(mode):
        inside = target.is_relative_to(root)
        return "" if inside else f"a symbolic link to the folder {target}: not followed; name that folder to index it"
    if not target.is_relative_to(root):
        return f"a symbolic link to {target}, outside {root}: not followed; name that file to index it"
    *folders, name = target.relative_to(root).parts
    if _passed_over(name, folder=False) or any(_passed_over(f, folder=True) for f in folders):
        return f"a symbolic link to {target}, which a walk passes over (hidden, or in __pycache__): not followed"
    return None


def _unreadable_reason(error: OSError, what: str) -> str:
    why = error.strerror or type(error).__name__
    return (
        f"{what} could not be read ({why}); its files were not indexed and its documents not pruned: "
        "make it readable (permissions, path length) and run again"
    )
