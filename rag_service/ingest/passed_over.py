"""What a walk over a folder passes over on purpose, besides hidden entries and ``__pycache__`` (which it passes
over silently): what git ignores, ``node_modules`` folders, virtualenvs and lock files.

In a git work tree a walk asks git once which untracked files and folders it ignores (``.gitignore`` files,
``.git/info/exclude`` and the global excludes file: ``git ls-files --others --ignored --exclude-standard
--directory``), with the checkout's configuration kept from running anything, as ``git_tracked`` asks. A folder
holding its own ``.git`` (a nested checkout, a submodule) is asked about in turn. A folder the user names that git
ignores whole (``rag reindex build/``) is read whole: naming it is the user's choice, as naming a file is. Without
git, or outside a work tree, nothing is ignored by git; ``node_modules``, a folder holding ``pyvenv.cfg``, a
documentation tool's output (``DOCS_BUILD_MARKERS``: Sphinx's ``_build/html`` beside its ``.rst`` sources stored
every page twice or three times, its copies took 67 of 95 result slots, audit 59b), a Sphinx project's theme
folders (``SPHINX_THEME_FOLDERS``) and lock files by name
(``package-lock.json``, ``pnpm-lock.yaml``, ``*.lock``, ...) are passed over everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from rag_service.git_tracked import git_said, run_git

#: the kinds of what is passed over, in the order the report names them, each folder kind ending its names in /
GIT_FOLDER, GIT_FILE, NODE_MODULES, VIRTUALENV, DOCS_BUILD, DOCS_THEME, LOCK_FILE = (
    "git_folder",
    "git_file",
    "node_modules",
    "virtualenv",
    "docs_build",
    "docs_theme",
    "lock_file",
)
FOLDER_KINDS = frozenset({GIT_FOLDER, NODE_MODULES, VIRTUALENV, DOCS_BUILD, DOCS_THEME})
#: a Sphinx project's theme folders (beside its ``conf.py``): Jinja templates, CSS and scripts, no documentation (a
#: template titled ``{{ _('Sphinx documentation contents') }}`` came back eighth for a question, audit 59b)
SPHINX_THEME_FOLDERS = frozenset({"_templates", "_static", "_themes"})
#: a file whose presence makes a folder a documentation tool's output: Sphinx's HTML (``.buildinfo``) and doctrees
#: (``environment.pickle``), an Antora site (its UI's ``_/js/site.js``), a MkDocs site (``search/search_index.json``)
DOCS_BUILD_MARKERS = (".buildinfo", "environment.pickle", os.path.join("_", "js", "site.js"),
                      os.path.join("search", "search_index.json"))  # fmt: skip
#: lock files not named ``*.lock``
LOCK_NAMES = frozenset({"package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml"})
#: how long git may take to list what a work tree ignores
GIT_TIMEOUT_S = 60


def kind_by_name(directory: str | Path, name: str, *, folder: bool) -> str | None:
    """The kind (above) of the entry ``name`` of ``directory`` a walk passes over whatever git says, or None:
    ``node_modules``, a virtualenv (a folder holding ``pyvenv.cfg``), a documentation build, a lock file."""
    if folder:
        if name == "node_modules":
            return NODE_MODULES
        inside = os.path.join(directory, name)
        if os.path.isfile(os.path.join(inside, "pyvenv.cfg")):
            return VIRTUALENV
        if name in SPHINX_THEME_FOLDERS and os.path.isfile(os.path.join(directory, "conf.py")):
            return DOCS_THEME
        return DOCS_BUILD if any(os.path.isfile(os.path.join(inside, m)) for m in DOCS_BUILD_MARKERS) else None
    return LOCK_FILE if name in LOCK_NAMES or name.endswith(".lock") else None


class GitIgnores:
    """What git ignores below the folders of one walk, spelled as the walk spells its paths; ``problems`` holds a
    line per work tree git could not answer for (git missing, failing, or refusing the checkout)."""

    def __init__(self) -> None:
        self.folders: set[Path] = set()
        self.files: set[Path] = set()
        self.problems: list[str] = []

    def kind(self, path: Path, *, folder: bool) -> str | None:
        """``GIT_FOLDER`` or ``GIT_FILE`` when git ignores the walked entry ``path``, else None."""
        if folder:
            return GIT_FOLDER if path in self.folders else None
        return GIT_FILE if path in self.files else None

    def below(self, path: Path, root: Path) -> bool:
        """Whether git ignores ``path`` or a folder holding it, up to the walked ``root`` (a link's target)."""
        return path in self.files or any(p in self.folders for p in (path, *path.parents) if p.is_relative_to(root))

    def ask(self, folder: Path) -> None:
        """Learn what git ignores below ``folder`` (a folder the walk reads, as it spells it), from the checkout
        holding it; nothing when it lies in none, or when git ignores ``folder`` itself (named, it is read)."""
        resolved = folder.resolve()
        top = next((p for p in (resolved, *resolved.parents) if os.path.lexists(p / ".git")), None)
        if top is None:
            return
        inside = resolved.relative_to(top).as_posix()
        listed = self._list(top, inside)
        prefix = "" if inside == "." else inside + "/"
        if any(entry.endswith("/") and prefix.startswith(entry) for entry in listed):
            return  # the folder itself, or one holding it, is ignored: the user named it
        for entry in listed:
            spelled = folder / entry[len(prefix) :]
            (self.folders if entry.endswith("/") else self.files).add(spelled)

    def _list(self, top: Path, inside: str) -> list[str]:
        """What git ignores in the work tree ``top`` at or below ``inside`` (relative to ``top``; folders end in
        ``/``); empty where ``top`` is no work tree, or git cannot say (then ``problems`` says why)."""
        args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--", inside]
        done = run_git(top, args, timeout=GIT_TIMEOUT_S)
        if isinstance(done, str):
            reason = done
        elif done.returncode == 0:
            return [entry for entry in done.stdout.decode(errors="surrogateescape").split("\0") if entry]
        elif b"not a git repository" in done.stderr:
            return []  # a folder named .git, not a work tree: nothing is ignored, as outside git
        else:
            reason = git_said(done)
        if _is_work_tree(top):
            self.problems.append(f"what git ignores in {top} is not known ({reason}); it was indexed")
        return []


def _is_work_tree(top: Path) -> bool:
    """Whether ``top/.git`` looks like git's own (a ``HEAD`` in it, or a ``.git`` file pointing elsewhere)."""
    return (top / ".git" / "HEAD").is_file() or (top / ".git").is_file()
