"""The definitions of a non-Python text for the ``code`` strategy, by definition lines and block ends.

- **Starts**: a line starting with one of the language's definition words (LangChain's separators, from
  ``RecursiveCharacterTextSplitter.get_separators_for_language``, minus control flow; SQL and shell have theirs
  here), a signature line ending in ``{`` (brace languages), JS/TS ``export``/``async``/arrow forms and methods or
  arrows whose parameters go on over the next lines (their ``(`` closing before a body), or a C function at column
  0 whose body follows. A line starting with a type or modifier word (``int``, ``void``, ``public``, ``static``,
  ...) or ``const``/``let``/``var`` is one only at brace depth 0, or as a signature: a local ``int ret;`` is not.
  Lines inside comments, strings and JS/TS regex literals are never starts (``code_scan``).
- **Leads**: the comment lines (``//``, ``/* */`` and JSDoc blocks, ``#``, ``--``), attributes (``#[...]``,
  ``[...]``) and decorators (``@...``) right above a start, no blank line between, go with it.
- **Ends**: brace languages end a definition with the brace that closes its first ``{`` (in JS/TS, the first
  outside its signature's parens; or at its ``;``: a declaration; a Rust ``macro_rules!`` in parens or brackets at
  its closing one); Ruby, Elixir, Lua and Python by indentation (with a closing ``end``); SQL statements at the
  next start. A definition whose block holds others is their parent (a class and its methods); a TS interface or
  type alias holds none: its members have no bodies (the ``{`` of ``getUser(id: string): {`` opens an object type).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from rag_service.ingest.code_items import (
    GO_KEYWORDS,
    ITEM_LANGUAGES,
    RUST_ITEM_FORM,
    attribute_start,
    go_spec_starts,
    group_end,
    is_container,
    is_group,
    is_item_start,
    keeps_item,
    macro_end,
)
from rag_service.ingest.code_lines import Definition, indent_width, lead_start, line_end, line_start
from rag_service.ingest.code_names import JS_ASSIGNED_CLASS_FORM, JS_METHOD_FORM, JS_PROPERTY, definition_names
from rag_service.ingest.code_scan import JS_LANGUAGES, Scan

#: keywords that start a definition, per language (LangChain's separators minus control flow)
_CONTROL = frozenset({"if", "for", "while", "switch", "case", "default", "else", "return", "continue", "break",
                      "try", "throw", "finally", "catch", "foreach", "do", "loop", "match", "when", "unless",
                      "begin", "rescue", "let", "var", "val", "const"})  # fmt: skip
_LANGCHAIN_NAMES = {
    "js": "JS", "ts": "TS", "go": "GO", "java": "JAVA", "rust": "RUST", "c": "C", "cpp": "CPP",
    "csharp": "CSHARP", "ruby": "RUBY", "php": "PHP", "kotlin": "KOTLIN", "swift": "SWIFT", "scala": "SCALA",
    "python": "PYTHON", "proto": "PROTO", "lua": "LUA", "elixir": "ELIXIR", "powershell": "POWERSHELL", "sol": "SOL",
}  # fmt: skip
_OWN_KEYWORDS = {
    # the other statements (grant, insert, a function body's select) are code between definitions
    "sql": ("create",),
    "shell": ("function",),
}
_SHELL_FUNCTION = r"|^[ \t]*[A-Za-z_][\w-]*[ \t]*\(\)[ \t]*\{"
#: a method or function signature line ending in ``{`` (``method1(b) {``, ``public int size() {``, ``#evict() {``)
_SIGNATURE_FORM = (
    r"^[ \t]*(?!(?:if|for|while|switch|catch|else|do|try|return|new)\b)(?:[\w<>\[\],.*&?@:]+[ \t]+)*"
    r"[*#]?[A-Za-z_$][\w$]*[ \t]*(?:<[^>\n]*>)?\([^;\n]*\)[^;{\n]*\{[ \t]*$"
)
_SIGNATURE = re.compile(_SIGNATURE_FORM)
#: JS/TS definitions the keywords miss: ``export default class``, ``async function``, ``const f = (x) => {``,
#: a class assigned (``module.exports = class X {``, ``exports.X = class {``, ``const X = class {``), an object's
#: arrow method (``close: (key) => {``)
_JS_FORMS = (
    r"|^[ \t]*(?:export[ \t]+(?:default[ \t]+)?)?(?:declare[ \t]+)?(?:abstract[ \t]+)?(?:async[ \t]+)?"
    r"(?:function\b|class\b|interface\b|enum\b|namespace\b|type[ \t]+[A-Za-z_$])"
    r"|^[ \t]*(?:export[ \t]+)?(?:const|let|var)[ \t]+[A-Za-z_$][\w$]*[ \t]*(?::[^=\n]*)?=[ \t]*(?:async[ \t]+)?"
    r"(?:function\b|\([^)\n]*\)[ \t]*(?::[^=\n]*)?=>|[A-Za-z_$][\w$]*[ \t]*=>)"
    r"|^" + JS_ASSIGNED_CLASS_FORM
    + r"|^[ \t]*[A-Za-z_$][\w$]*[ \t]*:[ \t]*(?:async[ \t]+)?(?:\([^()\n]*\)|[A-Za-z_$][\w$]*)[ \t]*=>[ \t]*\{[ \t]*$"
)
#: a TS interface or type alias (``export interface Store {``, ``type Api = {``): its members are no definitions
_TS_TYPE = re.compile(
    r"[ \t]*(?:export[ \t]+(?:default[ \t]+)?)?(?:declare[ \t]+)?(?:interface\b|type[ \t]+[A-Za-z_$])"
)
#: JS/TS signatures whose parameters go on past the line (``  async request(``, ``const f = async (``): each is
#: one where its ``(`` closes on a later line before a body (``) {``, ``): Promise<T> {``, ``) => ``)
_JS_OPEN_METHOD = re.compile("^" + JS_METHOD_FORM, re.MULTILINE)
_JS_OPEN_ARROW = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?:const|let|var)[ \t]+[A-Za-z_$][\w$]*[ \t]*(?::[^=\n]*)?=[ \t]*(?:async[ \t]+)?\(",
    re.MULTILINE,
)
_METHOD_BODY = re.compile(r"[ \t]*(?::[^;{}=()]*)?\s*\{")
_ARROW_BODY = re.compile(r"[ \t]*(?::[^;{}=()]*)?\s*=>")
#: a C function at column 0, its return type possibly on the line above (``static PyObject *``)
_C_FUNCTION = (
    r"|^(?:[A-Za-z_][\w \t*]*[ \t*]\n)?(?!(?:if|for|while|switch|return|else|do|typedef|struct|enum|union)\b)"
    r"[A-Za-z_][\w \t*&:<>,~]{0,200}?[A-Za-z_~][\w:~]*[ \t]*\("
)
#: C types declared at column 0 (``struct outd {``, ``typedef enum {``)
_C_TYPES = r"|^(?:typedef[ \t]+)?(?:struct|union|enum)\b"
#: Rust items the keyword ``fn`` misses: ``pub fn``, ``impl ... for ...``, ``pub struct``, ``macro_rules!``, ...
_RUST_FORMS = "|^" + RUST_ITEM_FORM
_BRACE_LANGUAGES = frozenset({"js", "ts", "go", "java", "rust", "c", "cpp", "csharp", "php", "kotlin", "swift",
                              "scala", "proto", "sol", "shell", "powershell"})  # fmt: skip
#: (every Rust item starts with its keyword: a Rust line ending in ``{`` is no signature for that alone)
_SIGNATURE_LANGUAGES = _BRACE_LANGUAGES - {"proto", "sol", "shell", "powershell", "rust"}
#: languages whose definitions end by indentation (``end`` closing them, for all but Python)
_INDENT_LANGUAGES = frozenset({"python", "ruby", "elixir", "lua"})
#: words that start a definition only at brace depth 0 (or on a signature line): types, modifiers, variables
_DEPTH_ZERO_WORDS = frozenset({"void", "int", "float", "double", "public", "protected", "private", "static",
                               "abstract", "internal", "companion", "event", "delegate", "const", "let", "var",
                               "export"})  # fmt: skip
_C_TYPE_WORDS = frozenset({"void", "int", "float", "double"})
_FIRST_WORD = re.compile(r"[ \t]*([A-Za-z_]+)")
_CLASS_WORD = re.compile(r"\b(?:class|interface|enum|struct|record|object|trait)\b")
#: line comments and decorators of the other languages
_LINE_LEADS = {"python": ("#", "@"), "ruby": ("#",), "elixir": ("#", "@"), "lua": ("--",), "sql": ("--",)}
#: attribute and decorator lines of the brace languages
_ATTRIBUTES = {"rust": ("#[",), "php": ("#[",), "csharp": ("[",), "java": ("@",), "kotlin": ("@",),
               "scala": ("@",), "swift": ("@",), "js": ("@",), "ts": ("@",)}  # fmt: skip
_END_LINE = re.compile(r"[ \t]*end\b")
_DOLLAR_QUOTE = re.compile(r"\$[A-Za-z_]*\$")
#: the braces a definition's first lines may hold before its body's (inline types, default values)
_BRACES_LOOKED_AT = 8


@cache  # asked for each definition line a scan meets
def definition_keywords(language: str) -> tuple[str, ...]:
    """The words that start a definition line in ``language`` (empty for unknown languages)."""
    if language in _OWN_KEYWORDS:
        return _OWN_KEYWORDS[language]
    name = _LANGCHAIN_NAMES.get(language)
    if name is None:
        return ()
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    separators = RecursiveCharacterTextSplitter.get_separators_for_language(Language[name])
    words = [s.strip() for s in separators if s.startswith("\n") and s.strip()]
    return tuple(w for w in words if w not in _CONTROL) + (GO_KEYWORDS if language == "go" else ())


@cache
def definition_pattern(language: str) -> re.Pattern[str] | None:
    """The lines that may start a definition in ``language`` (before the depth and comment checks); None: none."""
    words = definition_keywords(language)
    if not words:
        return None
    flags = re.MULTILINE | (re.IGNORECASE if language == "sql" else 0)
    extra = _SHELL_FUNCTION if language == "shell" else ""
    extra += "|" + _SIGNATURE_FORM if language in _SIGNATURE_LANGUAGES else ""
    extra += {"js": _JS_FORMS, "ts": _JS_FORMS, "c": _C_FUNCTION + _C_TYPES, "cpp": _C_FUNCTION + _C_TYPES}.get(
        language, _RUST_FORMS if language == "rust" else ""
    )
    return re.compile(r"^[ \t]*(?:" + "|".join(re.escape(w) for w in words) + r")\b" + extra, flags)


def generic_definitions(text: str, language: str) -> list[Definition]:
    """The top-level definitions of ``text`` in ``language``, their nested ones as children (see the module doc)."""
    pattern = definition_pattern(language)
    if pattern is None:
        return []
    scan = Scan(text, language) if language in _BRACE_LANGUAGES else None
    starts = _starts(text, language, pattern, scan)
    leads: list[int] = []
    is_lead = _lead_test(text, language, scan)
    for i, start in enumerate(starts):
        floor = line_end(text, starts[i - 1]) if i else 0
        leads.append(max(floor, lead_start(text, start, is_lead)))
    roots: list[Definition] = []
    stack: list[Definition] = []
    for i, start in enumerate(starts):
        limit = leads[i + 1] if i + 1 < len(starts) else len(text)
        end = _end(text, language, start, limit, scan)
        while stack and stack[-1].end <= start:
            stack.pop()
        parent = stack[-1].start if stack else None
        if language in ITEM_LANGUAGES and not keeps_item(text, language, parent, start, documented=leads[i] < start):
            continue
        if language in JS_LANGUAGES and parent is not None and _TS_TYPE.match(text, parent):
            continue  # a member's inline object type (``load: () => {``) is no body
        if stack:
            end = min(end, stack[-1].end)
        names = definition_names(text, start, end, language)
        node = Definition(leads[i], start, end, names, container=language == "rust" and is_container(text, start))
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    return roots


def _starts(text: str, language: str, pattern: re.Pattern[str], scan: Scan | None) -> list[int]:
    starts: list[int] = []
    for start, first, open_method in _candidates(text, language, pattern, scan):
        if scan is not None:
            if scan.skipped_at(first) is not None:
                continue
            if language in ITEM_LANGUAGES:
                if not is_item_start(text, language, start, first, scan):
                    continue
                if not starts or start > starts[-1]:
                    starts.append(start)
                continue
            word = _FIRST_WORD.match(text, start)
            line = text[start : line_end(text, start)]
            signature = open_method or _SIGNATURE.match(line) is not None
            # an object's ``key: function (x) {`` is a method whatever ends the line above (``name: 'cache',``)
            keyed = language in JS_LANGUAGES and JS_PROPERTY.match(line) is not None
            if signature and scan.depth(first) > 0 and not keyed and not _after_statement(text, start):
                continue  # ``    NEXT() != x) {``: the rest of a condition, not a method
            if (
                word is not None
                and word[1] in _DEPTH_ZERO_WORDS
                and not signature
                and not _CLASS_WORD.search(line)
                and (
                    first > start
                    or scan.depth(first) > 0
                    or (word[1] in _C_TYPE_WORDS and _is_declaration(text, start, scan))
                )
            ):
                continue  # a local ``int ret;``, a field, a global variable: not a definition
            c_form = language in ("c", "cpp") and not _SIGNATURE.match(line)
            keyword = word is not None and word[1] in definition_keywords(language)
            if c_form and not keyword and (scan.depth(first) > 0 or _is_declaration(text, start, scan)):
                continue  # a prototype or a call at column 0, not a function's definition
        if not starts or start > starts[-1]:
            starts.append(start)
    return starts


def _candidates(
    text: str, language: str, pattern: re.Pattern[str], scan: Scan | None
) -> list[tuple[int, int, bool]]:
    """The lines that may start a definition, in order: their start, their first non-blank character, and whether
    the line is a JS/TS method signature over several lines (judged as a signature)."""
    found = {m.start(): (m.start() + len(m[0]) - len(m[0].lstrip()), False) for m in pattern.finditer(text)}
    if scan is not None and language == "go":
        for start in go_spec_starts(text, scan):
            line = text[start : line_end(text, start)]
            found.setdefault(start, (start + len(line) - len(line.lstrip(" \t")), False))
    if scan is not None and language in JS_LANGUAGES:
        for body, forms in ((_METHOD_BODY, _JS_OPEN_METHOD), (_ARROW_BODY, _JS_OPEN_ARROW)):
            for match in forms.finditer(text):
                paren = match.end() - 1
                close = scan.paren_closes.get(paren)
                if close is None or text.find("\n", paren, close) < 0 or not body.match(text, close + 1):
                    continue  # on one line (the forms above), a call, or no signature
                indent = len(match[0]) - len(match[0].lstrip())
                found.setdefault(match.start(), (match.start() + indent, forms is _JS_OPEN_METHOD))
    return [(start, *found[start]) for start in sorted(found)]


def _after_statement(text: str, start: int) -> bool:
    """Whether the line above ``start`` (blank lines skipped) ends a statement or block, or is a comment,
    attribute or decorator: a signature can start there, not in the middle of an expression."""
    above = text[:start].rstrip()
    line = above[line_start(above, len(above)) :].strip()
    return not line or line.endswith((";", "{", "}", "},", ":", "*/")) or line.startswith(("//", "@", "#", "*"))


def _is_declaration(text: str, start: int, scan: Scan) -> bool:
    """Whether the statement at ``start`` ends with ``;`` before any block opens (``int x = 5;``, a prototype).
    In Rust, a ``;`` inside brackets is an array type's (``fn f() -> [u8; 3] {``)."""
    semicolon = text.find(";", start)
    while semicolon >= 0 and (
        scan.skipped_at(semicolon) is not None
        or (scan.language == "rust" and text.count("[", start, semicolon) > text.count("]", start, semicolon))
    ):
        semicolon = text.find(";", semicolon + 1)
    opened = scan.first_open(start, len(text))
    return semicolon >= 0 and (opened is None or semicolon < opened)


def _lead_test(text: str, language: str, scan: Scan | None) -> Callable[[int, int], int | None]:
    """What ``lead_start`` asks of each line above a definition (see there)."""
    attributes = _ATTRIBUTES.get(language, ())
    prefixes = _LINE_LEADS.get(language, ())

    def is_lead(start: int, end: int) -> int | None:
        line = text[start:end]
        body = line.strip()
        first = start + len(line) - len(line.lstrip())
        if scan is not None:
            skipped = scan.skipped_at(first)
            if skipped is not None and skipped[2] and skipped[1] >= start + len(line.rstrip()):
                opener = line_start(text, skipped[0])
                return opener if not text[opener : skipped[0]].strip() else None
            if language == "rust" and body.endswith("]") and not body.startswith("#["):
                return attribute_start(text, start)  # the last line of ``#[cfg(any(`` over several lines
            return start if body.startswith(attributes) and attributes else None
        return start if prefixes and body.startswith(prefixes) else None

    return is_lead


def _block(text: str, start: int, limit: int, scan: Scan, language: str) -> int | None:
    """The ``{`` opening the body of the definition at ``start``: the first that closes past its own line (an
    inline ``{ ownerId: string }`` type is not it), or else the first one (a one-line body). In JS/TS, a brace
    inside the signature's parens (a destructured parameter, an object type over several lines) is not it either."""
    depth = scan.paren_depth(start) if language in JS_LANGUAGES else None
    first = scan.first_open(start, limit, paren_depth=depth)
    opened = first
    for _ in range(_BRACES_LOOKED_AT):
        if opened is None or scan.closes.get(opened, len(text)) >= line_end(text, opened):
            break
        opened = scan.first_open(opened + 1, limit, paren_depth=depth)
    return first if opened is None else opened


def _end(text: str, language: str, start: int, limit: int, scan: Scan | None) -> int:
    """Past the last line of the definition starting at ``start`` (``limit``: where the next one leads)."""
    if language == "go" and is_group(text, start):
        return group_end(text, start)
    if language == "rust" and scan is not None and (closed := macro_end(text, start, scan)) is not None:
        return closed
    if scan is not None:
        opened = _block(text, start, limit, scan, language)
        if opened is not None and not _is_declaration(text, start, scan):
            close = scan.closes.get(opened)
            return len(text) if close is None else line_end(text, close)
        semicolon = text.find(";", start, limit)
        return line_end(text, semicolon) if semicolon >= 0 else limit
    if language == "sql":
        return _statement_end(text, start, limit)
    if language not in _INDENT_LANGUAGES:
        return limit
    indent = indent_width(text[start : line_end(text, start)])
    position = line_end(text, start)
    while position < len(text):
        after = line_end(text, position)
        line = text[position:after]
        if line.strip() and indent_width(line) <= indent and not line.lstrip().startswith((")", "]", "}", "#")):
            return after if language != "python" and _END_LINE.match(line) else position
        position = after
    return len(text)


def _statement_end(text: str, start: int, limit: int) -> int:
    """Past the line ending the SQL statement at ``start`` with ``;``, not inside a ``$$`` body or a
    ``BEGIN ATOMIC ... END`` (``limit`` if none does)."""
    position, quoted, atomic = start, False, False
    while position < limit:
        after = line_end(text, position)
        line = text[position:after].strip()
        quoted ^= len(_DOLLAR_QUOTE.findall(line)) % 2 == 1
        upper = line.upper()
        atomic = atomic or upper.endswith("BEGIN ATOMIC")
        if line.endswith(";") and not quoted and (not atomic or upper.startswith("END")):
            return after
        position = after
    return limit
