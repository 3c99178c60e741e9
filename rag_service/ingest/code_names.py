"""The names a definition adds to a ``code`` chunk's header path, read from its own first lines (never from the
comments above it): a class-like declaration's name, a Rust ``impl``'s type, a Go method's receiver type and name,
a JS/TS class's assigned name or an object method's key, or a function's name. A heuristic over one to three lines,
not a parser."""

from __future__ import annotations

import re

from rag_service.ingest.code_items import ITEM_LANGUAGES, item_names

_CLASS_WORDS = "class|interface|struct|enum|trait|object|namespace|module|record|defmodule|defprotocol"
#: an anonymous class (``export default class extends Base {``) has no name: its keyword is none
_CLASS_LIKE_FORM = (
    r"[ \t]*(?:[\w@\[\]()\"',.=]+[ \t]+)*?(?:{words})[ \t]+(?!(?:extends|implements)\b)"
    r"([A-Za-z_$][\w$]*(?:\.[A-Z][\w$]*)*)"
)
_CLASS_LIKE = re.compile(_CLASS_LIKE_FORM.format(words=_CLASS_WORDS))
#: languages whose declarations have words of their own (a proto file's messages, a Go or TS ``type``)
_CLASS_LIKE_BY_LANGUAGE = {
    "proto": re.compile(_CLASS_LIKE_FORM.format(words="message|service|enum|oneof|extend")),
    "go": re.compile(_CLASS_LIKE_FORM.format(words="type")),
    "ts": re.compile(_CLASS_LIKE_FORM.format(words=_CLASS_WORDS + "|type")),
}
#: ``impl Display for Store`` is ``Store``'s, as ``impl<T> Store<T>`` and ``impl<'a> IntoIterator for &'a Store`` are
_RUST_IMPL = re.compile(
    r"[ \t]*(?:pub[ \t]+)?(?:unsafe[ \t]+)?impl\b(?:[ \t]*<[^{\n]*?>)?[ \t]+(?:[^{\n]*?[ \t]for[ \t]+)?"
    r"(?:[&*][ \t]*(?:'\w+[ \t]+)?(?:mut[ \t]+)?)?(?:[A-Za-z_]\w*::)*([A-Za-z_]\w*)"
)
#: ``func (c *Client) start() error {``: the receiver's type, then the method
_GO_METHOD = re.compile(r"func[ \t]*\([^)]*?\*?([A-Za-z_]\w*)(?:\[[^\]]*\])?[ \t]*\)[ \t]*([A-Za-z_]\w*)")
FUNCTION_NAME = re.compile(
    r"\b(?:def|defp|defmacro|func|function\*?|fn|fun|sub|procedure)\s+(?:\([^)]*\)[ \t]*)?[\"`]?"
    r"([A-Za-z_$][\w$]*(?:[.:][A-Za-z_$][\w$]*)*)"
    r"|\b(?:table|view|index|trigger|procedure)[ \t]+(?:if[ \t]+not[ \t]+exists[ \t]+)?([\w.\"`]+)"
    r"|\b(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*(?::[^=\n]*)?="
    # a call-like line names a definition only from a whole word: without (?<![\w$]) ``if (`` gave ``f``
    r"|(?<![\w$])(?!(?:if|for|while|switch|catch|return|new|else|function)\b)([A-Za-z_$][\w$]*)"
    r"[ \t]*\([^;{}]*\)[ \t]*(?:->[^{]*|:[^{=]*|throws[^{]*|const[ \t]*)?\{?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


#: a JS/TS method's first line up to its ``(``, its name captured (``  static async *load<T>(``); never a control
#: statement (``if (``) nor a call after a keyword (``return f(``)
JS_METHOD_FORM = (
    r"[ \t]*(?!(?:if|for|while|switch|catch|with|else|do|try|return|new|await|typeof|throw|yield|super|function"
    r"|delete|void|case)\b)(?:(?:static|async|get|set|public|private|protected|readonly|override|abstract)[ \t]+)*"
    r"(?:\*[ \t]*)?#?([A-Za-z_$][\w$]*)[ \t]*(?:<[^>\n]*>)?\("
)
_JS_METHOD = re.compile(JS_METHOD_FORM)
#: a JS/TS class assigned to a name (``const X = class {``, ``exports.X = class {``) or to ``module.exports``
JS_ASSIGNED_CLASS_FORM = (
    r"[ \t]*(?:export[ \t]+)?(?:(?:const|let|var)[ \t]+[A-Za-z_$][\w$]*[ \t]*(?::[^=\n]*)?"
    r"|(?:module\.)?exports(?:\.[A-Za-z_$][\w$]*)?[ \t]*)=[ \t]*class\b"
)
#: the same, naming it after what it is assigned to, else its own name (``module.exports = class Store {``)
_JS_ASSIGNED_CLASS = re.compile(
    r"[ \t]*(?:export[ \t]+)?(?:(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*(?::[^=\n]*)?"
    r"|(?:module\.)?exports(?:\.([A-Za-z_$][\w$]*))?[ \t]*)=[ \t]*class\b"
    r"(?:[ \t]+(?!(?:extends|implements)\b)([A-Za-z_$][\w$]*))?"
)
#: an object's method as a property (``close: function (key) {``, ``flush: async (entries) => {``): its key
JS_PROPERTY = re.compile(
    r"[ \t]*([A-Za-z_$][\w$]*)[ \t]*:[ \t]*(?:async[ \t]+)?(?:function\b|\(|[A-Za-z_$][\w$]*[ \t]*=>)"
)
#: the lines a JS/TS signature may take
_SIGNATURE_LINES = 40


def definition_names(text: str, start: int, end: int, language: str) -> tuple[str, ...]:
    """The names of the definition whose own first line starts at ``start`` (and which ends by ``end``)."""
    first_lines = text[start:end].split("\n", 3)
    line = first_lines[0]
    if language == "rust" and (impl := _RUST_IMPL.match(line)):
        return (impl[1],)
    if language == "go" and (method := _GO_METHOD.match(line.lstrip())):
        return method[1], method[2]
    if language in ITEM_LANGUAGES and (item := item_names(line, language)) is not None:
        return item
    if language in ("js", "ts") and (assigned := _JS_ASSIGNED_CLASS.match(line) or JS_PROPERTY.match(line)):
        return tuple(name for name in assigned.groups() if name)[:1]
    declared = _CLASS_LIKE_BY_LANGUAGE.get(language, _CLASS_LIKE).match(line)
    if declared is not None:
        return (declared[1],)
    if language in ("js", "ts") and line.count("(") > line.count(")"):
        line = _joined_signature(text[start:end])  # ``  async request(`` and its parameters, one per line
    # a signature over several lines (``CREATE FUNCTION`` then the name; a C return type alone above it), not a body
    opens_body = line.rstrip().endswith(("{", ":", " do"))
    for searched in (line,) if opens_body else (line, "\n".join(first_lines[:3])):
        match = FUNCTION_NAME.search(searched)
        if match is not None:
            return (next(g for g in match.groups() if g).strip('"`'),)
    if language in ("js", "ts") and (method := _JS_METHOD.match(line)):
        return (method[1],)  # ``async walk(entry = this.cwd, opts = {}) {``: braces in its parameters
    return ()


def _joined_signature(definition: str) -> str:
    """A JS/TS signature whose parameters go on past its first line, on one line: its lines up to the one where
    its parens close (at most ``_SIGNATURE_LINES``), their indentation collapsed."""
    lines: list[str] = []
    for line in definition.split("\n", _SIGNATURE_LINES)[:_SIGNATURE_LINES]:
        lines.append(line.strip())
        joined = " ".join(lines)
        if joined.count("(") <= joined.count(")"):
            break
    return " ".join(lines)
