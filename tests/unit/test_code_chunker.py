"""The ``code`` strategy on the cases audit 56b found wrong (its defects D3-D15), one test per rule."""

from __future__ import annotations

import pytest

from rag_service.ingest.chunk import TextChunk
from rag_service.ingest.chunkers import make_chunker
from rag_service.ingest.code_generic import generic_definitions
from rag_service.ingest.code_lines import Definition
from rag_service.ingest.code_scan import Scan
from tests.unit.test_chunker_properties import assert_chunks_valid


def chunks(source: str, text: str, **sizes: int) -> list[TextChunk]:
    doc = make_chunker("code", source=source, **sizes).split(text)
    assert_chunks_valid(text, doc, indented=True)
    return doc.chunks


@pytest.mark.parametrize("line", ["if (!res) {", "while (n > 0) {", "switch (op) {", "for (;;) {"])
def test_control_flow_lines_name_no_definition(line: str) -> None:
    """D5: ``if (`` gave the name ``f``, ``while (`` ``hile``, ``switch (`` ``witch``."""
    text = "int main(void)\n{\n    int n = 3;\n" + f"    {line}\n        n--;\n    }}\n" * 40 + "    return n;\n}\n"
    names = {n for c in chunks("gun.c", text, chunk_size=120) for n in c.header_path.split(" > ")}
    assert names <= {"gun", "main"}, names


def test_an_anonymous_function_is_not_named_function() -> None:
    text = "var run = function (a, b) {\n" + "  a = a + b;\n" * 150 + "};\n"
    assert all(not c.header_path.endswith("function") for c in chunks("run.js", text))


def test_a_method_chunk_keeps_its_first_line_indentation() -> None:
    """D11: the first line of a method lost its indentation (``start_char`` past it) while the rest kept theirs."""
    text = "class Big:\n" + "".join(
        f"    def m{i}(self):\n" + "        self.total = self.total + 1\n" * 20 + f"        return {i}\n\n"
        for i in range(3)
    )
    method = next(c for c in chunks("plat.py", text) if c.header_path == "plat > Big > m1")
    assert method.content.startswith("    def m1(self):\n        self.total")
    assert text[method.start_char - 1] == "\n"


def test_python_comments_above_a_definition_go_with_it() -> None:
    """D3 (Python): 13 of 16 ``#`` blocks right above a ``def`` in click+jinja2 went to the previous chunk."""
    first = "def first():\n" + "    value = 1\n" * 60 + "    return value\n"
    text = first + "\n\n# Explains what second does,\n# over two lines.\n@decorate\ndef second():\n    return 2\n"
    second = chunks("mod.py", text)[-1]
    assert second.header_path == "mod > second"
    assert second.content.startswith("# Explains what second does,\n# over two lines.\n@decorate\ndef second():")


def test_python_definitions_inside_top_level_blocks() -> None:
    """D8: ``if``/``else``/``try``/``except``/``with`` bodies were not searched: their functions had no name and
    were cut mid-way; the block's header line now leads its first definition."""
    body = "".join(f"    value_{i} = compute({i})\n" for i in range(40))
    text = (
        "import os\n\n"
        f'if os.name == "nt":\n    def home_dir():\n{body.replace("    ", "        ")}        return value_1\n'
        'else:\n    def home_dir():\n        return os.environ["HOME"]\n\n'
        "try:\n    from fast import parse\nexcept ImportError:\n    def parse(text):\n        return text\n"
    )
    found = [(c.header_path, c.content.split("\n", 2)[:2]) for c in chunks("plat.py", text, chunk_size=1500)]
    assert found == [
        ("plat", ["import os"]),
        ("plat > home_dir", ['if os.name == "nt":', "    def home_dir():"]),
        ("plat > home_dir", ["else:", "    def home_dir():"]),
        ("plat", ["try:", "    from fast import parse"]),
        ("plat > parse", ["except ImportError:", "    def parse(text):"]),
    ]


def test_python_comments_after_the_last_statement_stay_in_the_function() -> None:
    """D8b: ``ast`` ends a function at its last statement; its commented-out tail became a chunk of its own."""
    text = "def tail():\n    x = 1\n    return x\n    # old_return = compute_everything_again()\n\n    # return old\n"
    text += "\n\n# about the next one\ndef after():\n    return 2\n"
    found = [(c.header_path, c.content) for c in chunks("plat.py", text)]
    assert found == [
        ("plat > tail", text[: text.index("\n\n\n")]),
        ("plat > after", "# about the next one\ndef after():\n    return 2"),
    ]


def test_a_class_line_joins_its_first_method() -> None:
    """D12: a class too large for one chunk left ``class Big:`` (10 characters) as a chunk of its own."""
    methods = "".join(f"    def m{i}(self):\n" + "        self.n = self.n + 1\n" * 20 + "\n" for i in range(3))
    text = 'class Big:\n    """Counts."""\n\n    size = 3\n\n' + methods + "    label = 'big'\n"
    found = [(c.header_path, c.content.split("\n", 1)[0]) for c in chunks("plat.py", text)]
    assert found == [
        ("plat > Big > m0", "class Big:"),
        ("plat > Big > m1", "    def m1(self):"),
        ("plat > Big > m2", "    def m2(self):"),
    ]
    assert chunks("plat.py", text)[-1].content.endswith("label = 'big'")


def _jsdoc_class(methods: int) -> str:
    return "class Cache {\n" + "".join(
        f"    /**\n     * Returns entry number {i} of the cache, or undefined when it was evicted.\n     */\n"
        f"    entry{i}(key) {{\n" + "        const v = this.map.get(key);\n" * 8 + "        return v;\n    }\n\n"
        for i in range(methods)
    ) + "}\n"


def test_js_methods_one_per_chunk_with_their_doc_comments() -> None:
    """D3 + D4: six JSDoc'd methods were merged into 1,500-character chunks named after the first, and a doc
    comment ended the chunk before its method's."""
    found = chunks("cache.js", _jsdoc_class(6))
    assert [c.header_path for c in found] == [f"cache > Cache > entry{i}" for i in range(6)]
    assert found[0].content.startswith("class Cache {\n    /**\n     * Returns entry number 0")
    for i, chunk in enumerate(found[1:], start=1):
        assert chunk.content.startswith(f"    /**\n     * Returns entry number {i} of the cache")
    assert found[-1].content.endswith("        return v;\n    }\n\n}")


@pytest.mark.parametrize(
    ("source", "lead", "definition", "name"),
    [
        ("lib.rs", "/// Adds one.\n#[inline]\n", "pub fn add_one(x: u32) -> u32 {\n    x + 1\n}\n", "add_one"),
        ("api.ts", "// Logs calls.\n@Injectable()\n", "export class Api {\n  run() {\n    return 1;\n  }\n}\n", "Api"),
        ("Api.java", "/* Serves. */\n@Deprecated\n", "public class Api {\n    int n;\n}\n", "Api"),
        ("Api.cs", "/// <summary>Serves.</summary>\n[Serializable]\n", "public class Api {\n    int n;\n}\n", "Api"),
        ("run.sh", "# Runs it.\n# Twice.\n", "run_it() {\n  echo hi\n}\n", "run_it"),
        ("q.sql", "-- Adds one.\n", "CREATE FUNCTION add_one(int) RETURNS int AS 'select $1 + 1';\n", "add_one"),
    ],
)
def test_comments_attributes_and_decorators_go_with_their_definition(
    source: str, lead: str, definition: str, name: str
) -> None:
    """D3: Rust ``///`` lines and attributes, decorators and comments went to the previous definition's chunk."""
    before = "x = 1;\n" * 5 if source.endswith((".sh", ".sql")) else ""
    filler = "// filler line of the previous definition\n" * 40 if not before else "# filler\n" * 40
    if source.endswith(".sql"):
        filler = "-- filler\n" * 40
    previous = {"lib.rs": "fn first() {\n", "run.sh": "first() {\n", "q.sql": "CREATE TABLE first (\n"}.get(
        source, "function first() {\n" if source.endswith(".ts") else "class First {\n"
    )
    closing = ");\n" if source.endswith(".sql") else "}\n"
    text = before + previous + filler.replace("#", "  #").replace("//", "  //") + closing + lead + definition
    last = chunks(source, text)[-1]
    assert last.content.startswith(lead + definition.split("\n")[0]), last.content
    assert last.header_path.endswith(name)


def test_names_come_from_open_blocks_rust_impls_and_go_receivers() -> None:
    """D6: after ``struct outd {...};`` closed, every later chunk of gun.c was ``outd``; ``impl Display for
    Store`` gave ``std``; Go methods never named their receiver; a comment's ``append(`` named a method."""
    c_text = "struct outd {\n    int outfile;\n};\n\nint run(int n)\n{\n    int ret;\n" + "    n++;\n" * 200 + "}\n"
    assert {c.header_path for c in chunks("gun.c", c_text)} == {"gun > outd", "gun > run"}
    rust = 'impl std::fmt::Display for Store {\n    fn fmt(&self) -> String {\n        "Store".into()\n    }\n}\n'
    assert [c.header_path for c in chunks("lib.rs", rust)] == ["lib > Store > fmt"]
    go = (
        "type Client struct {\n\tname string\n}\n\n// Start calls append(x) on the helper.\n"
        "func (c *Client) start() error {\n\treturn nil\n}\n"
    )
    assert [c.header_path for c in chunks("client.go", go)] == ["client > Client", "client > Client > start"]


def test_a_local_declaration_starts_no_definition() -> None:
    """D7: ``    int ret;`` inside a C function was a definition start: a chunk ended on the function's ``{``."""
    text = "local int lunpipe(unsigned have,\n                  int outfile)\n{\n    int ret;\n    unsigned flags;\n"
    text += "    flags = flags + 1;\n" * 90 + "    return ret;\n}\n"
    found = chunks("gun.c", text)
    assert all(c.header_path == "gun > lunpipe" for c in found)
    assert found[0].content.startswith("local int lunpipe(") and "int ret;" in found[0].content


def test_text_gets_no_invented_definition_names() -> None:
    """D15: ``--strategy code`` on a README named chunks after words followed by ``(`` (``README > retrieve``)."""
    text = "# Guide\n\nTo search, call\nretrieve(query)\n\nand then\nsizes(x) {\n\n" * 60
    assert {c.header_path for c in chunks("README.md", text)} == {"README"}


def test_a_short_file_preamble_goes_with_the_first_definition() -> None:
    """A SQL file's one-line header comment, apart from the first CREATE by a blank line, stood alone as a chunk and
    outranked the tables for "database schema" (the PRD query)."""
    text = (
        "-- Tables of the support platform.\n\n"
        "CREATE TABLE customers (\n    id bigserial PRIMARY KEY,\n    email text NOT NULL\n);\n\n"
        "CREATE TABLE orders (\n    id bigserial PRIMARY KEY\n);\n"
    )
    chunks = make_chunker("code", source="db/schema.sql").split(text).chunks
    firsts = [c.content.splitlines()[0] for c in chunks]
    assert firsts == ["-- Tables of the support platform.", "CREATE TABLE orders ("]
    assert all(c.content == text[c.start_char : c.end_char] for c in chunks)


_REGEX_LITERALS = """\
function opens(s) {
  return s.split(/{/).length;
}

function closes(s) {
  return s.replace(/[}]/g, "").trim();
}

function quotes(s) {
  return s.split(/"/).length + "{";
}

function backquote(s) {
  return s.split(/`/).length;
}

function slash(p) {
  if (/^[a-z]:\\//i.test(p)) {
    return p;
  }
  return null;
}

function last() {
  return 1;
}
"""


def test_js_regex_literals_hold_no_braces_quotes_or_comments() -> None:
    """56b: a regex literal's ``{``, ``}``, quote or backquote counted as code (a block swallowed the next function
    or ended early), and ``/\\//`` opened a ``//`` comment that hid the ``{`` after it."""
    found = [(c.header_path, c.content) for c in chunks("re.js", _REGEX_LITERALS)]
    blocks = [block.strip() for block in _REGEX_LITERALS.split("\n\n")]
    names = ["opens", "closes", "quotes", "backquote", "slash", "last"]
    assert found == [(f"re > {name}", block) for name, block in zip(names, blocks, strict=True)]


@pytest.mark.parametrize(
    "division", ["a / b", "(a + b) / 2", "sizes[0] / 2", "n++ / 2", "total /2", "<p>{a}</p>", "1 /* c */ / 2"]
)
def test_a_slash_after_a_value_is_a_division(division: str) -> None:
    """Where ``/`` follows a value (a name, ``)``, ``]``, a comment after one) it divides, and JSX's ``</p>`` closes a
    tag: no regex literal starts there."""
    first = f'function ratio(a, b, n, sizes, total) {{\n  const r = {division}; const s = "/{{";\n  return r;\n}}\n'
    text = first + "\nfunction after() {\n  return 1;\n}\n"
    assert [c.header_path for c in chunks("ratio.js", text)] == ["ratio > ratio", "ratio > after"]


@pytest.mark.parametrize(
    ("code", "literal"),
    [
        ("x = /{/;", True), ("f(/{/)", True), ("return /{/.test(s)", True), ("s => /{/.test(s)", True),
        ("a = b /* c */ || /{/.x", True), ("/{/.test(s)", True), ("typeof /{/", True), ("a ? /{/ : 1", True),
        ("a / b / {}", False), ("n-- /{/", False), ("r = f(x) /{/", False), ("a > /{/", False),
    ],
)
def test_where_a_regex_literal_starts(code: str, literal: bool) -> None:
    """A ``/`` opens a regex literal where an expression may start, else it divides."""
    scan = Scan(code, "js")
    assert any(code[s:e].startswith("/{/") for s, e, _ in scan.skipped) == literal
    assert scan.depth(len(code)) == (0 if literal else 1) - code.count("}")


_PADDING = "".join(f"    const step{i} = compute(step, {i});\n" for i in range(6))
_MULTILINE_SIGNATURES = f"""\
class Client {{
  constructor(
    host,
    port
  ) {{
{_PADDING}    this.host = host;
  }}

  async request(
    method,
    path,
    body
  )
  {{
    if (Number.isNaN(method) ||
        path < 0) {{
      return;
    }}
{_PADDING}    return send(method, path, body);
  }}

  readdir(entry = this.cwd, opts = {{
    withFileTypes: true,
  }}) {{
{_PADDING}    return entry;
  }}
}}

function connect(
  host,
  {{ retries = 3,
    timeout = 10 }}
) {{
{_PADDING}  return new Client(host, retries, timeout);
}}

export const fetchAll = async (
  urls,
  limit
) => {{
{_PADDING}  return Promise.all(urls.slice(0, limit));
}};

function after() {{
  return 1;
}}
"""


def test_js_signatures_over_several_lines() -> None:
    """56b: a method whose parameters stand one per line was no definition (it joined the one before), a
    multi-line destructured parameter was taken for the body (the block ended early), and a multi-line arrow
    function was not named, nor a method with braces in its parameters; a condition over several lines is no
    definition."""
    found = [(c.header_path, c.content.split("\n")[0].strip(), c.content.split("\n")[-1]) for c in
             chunks("client.js", _MULTILINE_SIGNATURES, chunk_size=400)]
    assert found == [
        ("client > Client > constructor", "class Client {", "  }"),
        ("client > Client > request", "async request(", "  }"),
        ("client > Client > readdir", "readdir(entry = this.cwd, opts = {", "}"),
        ("client > connect", "function connect(", "}"),
        ("client > fetchAll", "export const fetchAll = async (", "};"),
        ("client > after", "function after() {", "}"),
    ]
    assert _definition_names(generic_definitions(_MULTILINE_SIGNATURES, "js")) == [
        ("Client",),
        ("Client", "constructor"),
        ("Client", "request"),
        ("Client", "readdir"),
        ("connect",),
        ("fetchAll",),
        ("after",),
    ]


def _definition_names(definitions: list[Definition], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Each definition's names under its parents', in order."""
    found: list[tuple[str, ...]] = []
    for node in definitions:
        found.append((*path, *node.names))
        found.extend(_definition_names(node.children, found[-1]))
    return found


def test_ts_signatures_with_types_over_several_lines() -> None:
    """An inline object type over several lines is a parameter's type, not the body; a typed method over several
    lines is a definition, and a multi-line call is not."""
    text = (
        "export async function load(\n  path: string,\n  options: {\n    encoding: string;\n    flag?: string;\n"
        f"  }},\n): Promise<string> {{\n{_PADDING}  return read(path, options);\n}}\n\n"
        "export class Server {\n  private async handle(\n    req: Request,\n    res: Response,\n"
        f"  ): Promise<void> {{\n{_PADDING}    await reply(\n      res,\n      req,\n    );\n  }}\n\n"
        f"  stop(): void {{\n{_PADDING}    this.closed = true;\n  }}\n}}\n"
    )
    found = [(c.header_path, c.content.split("\n")[0].strip(), c.content.split("\n")[-1]) for c in
             chunks("server.ts", text, chunk_size=400)]
    assert found == [
        ("server > load", "export async function load(", "}"),
        ("server > Server > handle", "export class Server {", "  }"),
        ("server > Server > stop", "stop(): void {", "}"),
    ]
