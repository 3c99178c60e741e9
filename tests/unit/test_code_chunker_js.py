"""The ``code`` strategy on JS/TS forms the last audits left: classes and objects assigned to a name or to
``module.exports``, doc comments too long to go with their definition, and TS types' members."""

from __future__ import annotations

import pytest

from rag_service.ingest.chunk import TextChunk
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.code_generic import generic_definitions
from tests.unit.test_chunker_properties import assert_chunks_valid
from tests.unit.test_code_chunker import _definition_names

_BODY = "".join(f"    this.value{i} = compute({i}, options, this.defaults);\n" for i in range(18))


def chunks(source: str, text: str, **sizes: int) -> list[TextChunk]:
    doc = make_chunker("code", source=source, **sizes).split(text)
    assert_chunks_valid(text, doc, indented=True)
    return doc.chunks


def _class_body() -> str:
    """Two methods too long to share a chunk (the class does not fit whole)."""
    return f"  constructor(options) {{\n{_BODY}  }}\n\n  get(key) {{\n{_BODY}    return this.value1;\n  }}\n"


@pytest.mark.parametrize(
    ("source", "opening", "closing"),
    [
        ("index.js", "module.exports = class Store {\n", "};\n"),
        ("index.js", "module.exports = class {\n", "};\n"),
        ("index.js", "exports.Store = class {\n", "};\n"),
        ("index.js", "module.exports.Store = class extends Base {\n", "};\n"),
        ("index.js", "export default class Store {\n", "}\n"),
        ("index.js", "export default class extends Base {\n", "}\n"),
        ("index.ts", "export default class implements Cache {\n", "}\n"),
        ("index.js", "const Store = class {\n", "};\n"),
        ("index.ts", "export const Store = class implements Cache {\n", "};\n"),
    ],
)
def test_a_class_assigned_or_exported_is_a_class(source: str, opening: str, closing: str) -> None:
    """``module.exports = class X {``, ``exports.X = class {`` and ``const X = class {`` were no definitions: their
    methods sat under the module (``index > constructor``), the class line with the first of them. An anonymous
    ``export default class extends Base {`` was named ``extends``."""
    text = f"'use strict';\n\n{opening}{_class_body()}{closing}"
    found = chunks(source, text)
    name = "Store" if "Store" in opening else None
    paths = ["index", name, "constructor"], ["index", name, "get"]
    assert [c.header_path for c in found] == [" > ".join(n for n in p if n) for p in paths]
    assert found[0].content.startswith("'use strict';\n\n" + opening + "  constructor(options) {")
    assert found[-1].content.endswith("return this.value1;\n  }\n" + closing.rstrip())


def test_the_methods_of_an_exported_object_are_named() -> None:
    """``module.exports = { a() {...}, b: function () {...}, c: async (x) => {...}, d: () => {...} }``: ``b`` and
    ``c`` were definitions without a name, cited as the module alone, and ``d`` no definition."""
    text = (
        "module.exports = {\n"
        f"  open(options) {{\n{_BODY}  }},\n\n"
        f"  close: function (key) {{\n{_BODY}  }},\n\n"
        f"  flush: async (entries) => {{\n{_BODY}  }},\n\n"
        f"  drain: async function* drain(entries) {{\n{_BODY}  }},\n\n"
        f"  reset: () => {{\n{_BODY}  }},\n"
        "};\n"
    )
    found = chunks("index.js", text)
    names = ["open", "close", "flush", "drain", "reset"]
    assert [c.header_path for c in found] == [f"index > {name}" for name in names]
    assert found[1].content.startswith("  close: function (key) {")


@pytest.mark.parametrize(
    "opening",
    [
        "flush: entries => {",
        "flush: async entries => {",
        "flush: (entries) => {",
        "flush: async (entries) => {",
        "flush: function (entries) {",
        "flush: async function (entries) {",
    ],
)
@pytest.mark.parametrize("before", ["  name: 'cache',\n", "  open() {\n    return 1;\n  },\n"])
def test_an_objects_method_is_named_after_its_key_whatever_its_form(opening: str, before: str) -> None:
    """``key: x => {`` without parentheses is a definition named ``key``, as ``key: (x) => {`` is. After a value
    (``name: 'cache',``), ``key: async (x) => {`` and ``key: function (x) {`` were no definitions: read as
    signatures, a line ending in ``,`` above them was taken for an expression they continue."""
    text = f"module.exports = {{\n{before}  {opening}\n{_BODY}  }},\n}};\n"
    found = chunks("index.js", text)
    assert [c.header_path for c in found][-1] == "index > flush"
    assert f"\n  {opening}\n    this.value0 = " in f"\n{found[-1].content}"  # short code above may join it
    assert found[-1].content.endswith("this.defaults);\n  },\n};")


def _jsdoc(lines: int) -> str:
    return "/**\n" + "".join(f" * Rule {i}: entries of kind {i} are loaded lazily, then cached by key.\n"
                             for i in range(lines)) + " */\n"  # fmt: skip


@pytest.mark.parametrize("source", ["loader.js", "loader.ts"])
def test_a_doc_comment_too_long_to_join_its_definition_is_named_after_it(source: str) -> None:
    """A JSDoc block that does not fit with its function was split under the file's name alone (as Go's and Rust's
    were), so a question its doc answers cited no definition."""
    doc = _jsdoc(30)
    assert len(doc) > 1_500
    text = f"import {{ cache }} from './cache';\n\n{doc}export function load(key) {{\n{_BODY}  return key;\n}}\n"
    found = chunks(source, text)
    assert found[0].header_path == "loader"
    assert found[0].content == "import { cache } from './cache';"
    assert [c.header_path for c in found[1:]] == ["loader > load"] * (len(found) - 1)
    assert found[1].content.startswith("/**\n * Rule 0:")
    assert found[-1].content.startswith("export function load(key) {")


def test_a_method_doc_comment_too_long_is_named_after_the_method() -> None:
    """The same inside a class: the doc pieces carried the class's path, not the method's."""
    doc = "".join("  " + line + "\n" for line in _jsdoc(30).splitlines())
    text = (
        f"class Loader {{\n  constructor(options) {{\n{_BODY}  }}\n\n"
        f"{doc}  load(key) {{\n{_BODY}    return key;\n  }}\n}}\n"
    )
    found = chunks("loader.js", text)
    assert found[0].header_path == "loader > Loader > constructor"
    assert [c.header_path for c in found[1:]] == ["loader > Loader > load"] * (len(found) - 1)
    assert found[-1].content.startswith("  load(key) {")


_TS_TYPES = """\
import { Db } from "./db";

/** Where users are kept. */
export interface UserStore {
  /** One user by id. */
  getUser(id: string): {
    name: string;
    age: number;
  };
  load: () => {
    ok: boolean;
  };
  count(): { total: number; active: number };
  save(user: { name: string }): void;
}

export type Api = {
  fetch(url: string): {
    status: number;
    body: string;
  };
};

export function makeStore(db: Db): UserStore {
  return db.store();
}
"""


def test_a_ts_interface_member_returning_an_object_type_is_no_definition() -> None:
    """``getUser(id: string): {`` and ``load: () => {`` in an interface (or a type literal) were read as methods
    whose body was their inline return type: an interface too long for one chunk was cut into members named as
    methods (``store > UserStore > getUser``). Members have no bodies; the interface stays one definition."""
    assert _definition_names(generic_definitions(_TS_TYPES, "ts")) == [("UserStore",), ("Api",), ("makeStore",)]
    found = chunks("store.ts", _TS_TYPES, chunk_size=120)
    paths = ["store > UserStore"] * 3 + ["store > Api", "store > makeStore"]
    assert [c.header_path for c in found] == paths
    assert found[0].content.startswith('import { Db } from "./db";\n\n/** Where users are kept. */\nexport interface')
    assert found[1].content.startswith("getUser(id: string): {\n    name: string;")
    assert found[2].content.endswith("save(user: { name: string }): void;\n}")
    assert found[3].content.startswith("export type Api = {\n  fetch(url: string): {")
    assert found[4].content == "export function makeStore(db: Db): UserStore {\n  return db.store();\n}"
