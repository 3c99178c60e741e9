"""The ``code`` strategy on Go and Rust as a team indexes them (audit 58's defects), one test per rule."""

from __future__ import annotations

import pytest

from rag_service.ingest.code_generic import generic_definitions
from rag_service.ingest.code_scan import Scan
from tests.unit.test_code_chunker import _definition_names, chunks


def _paths(source: str, text: str, **sizes: int) -> list[tuple[str, str]]:
    """Each chunk's header path and first line (stripped)."""
    return [(c.header_path, c.content.split("\n", 1)[0].strip()) for c in chunks(source, text, **sizes)]


@pytest.mark.parametrize(
    ("code", "hidden"),
    [
        ("struct S<'a> { s: &'a str }", False),
        ("fn f<'a, 'b>(x: &'a str) -> &'b str { x }", False),
        ("let c = '{';", True),
        ("let c = b'{';", True),
        ("let c = '\\u{7B}'; let d = '{';", True),
        ("let q = '\\''; let o = '{';", True),
    ],
)
def test_rust_lifetimes_are_no_char_literals(code: str, hidden: bool) -> None:
    """A lifetime's ``'`` paired with the next one as a char literal (``'a> { s: &'``), hiding the brace between:
    the block holding it closed at the wrong ``}``. A char literal's brace is still no brace."""
    scan = Scan(code, "rust")
    braces = code.count("{") - sum(code[s:e].count("{") for s, e, _ in scan.skipped)
    assert braces == (0 if hidden else 1), scan.skipped


def test_rust_a_lifetime_does_not_close_its_module_early() -> None:
    """``pub mod parse { pub struct Input<'a> { text: &'a str } ... }``: the struct's ``{`` was hidden, its ``}``
    closed the module, and the module's functions fell out of it."""
    text = (
        "pub mod parse {\n    /// Holds the input.\n    pub struct Input<'a> { text: &'a str }\n\n"
        "    /// Reads a word.\n    pub fn word(input: &Input) -> usize {\n        input.text.len()\n    }\n}\n\n"
        "/// Counts.\npub fn count() -> usize {\n    2\n}\n"
    )
    assert _definition_names(generic_definitions(text, "rust")) == [
        ("parse",),
        ("parse", "Input"),
        ("parse", "word"),
        ("count",),
    ]


_RUST_STRINGS = '''\
/// Raw, with a lone quote and a brace.
fn raw() -> &'static str {
    r#"a " {"#
}

/// Raw, no hashes, a backslash last.
fn path() -> &'static str {
    r"C:\\"
}

/// A string over two lines.
fn multi() -> &'static str {
    "first line {
second line"
}

/// After them.
fn after() -> u32 {
    1
}
'''


def test_rust_raw_and_multi_line_strings_hold_no_code() -> None:
    """A raw string's quotes and a string over several lines were read as code: their braces counted, and the
    block swallowed the next function."""
    assert _paths("raw.rs", _RUST_STRINGS) == [
        ("raw > raw", "/// Raw, with a lone quote and a brace."),
        ("raw > path", "/// Raw, no hashes, a backslash last."),
        ("raw > multi", "/// A string over two lines."),
        ("raw > after", "/// After them."),
    ]


def test_rust_code_inside_a_raw_string_is_no_definition() -> None:
    """anyhow's build.rs holds a probe program in ``r#"..."#``: its ``struct E`` and ``impl Display for E`` were
    definitions of the build script."""
    text = '/// A probe.\nconst PROBE: &str = r#"\n    struct E;\n'
    text += '    impl Display for E {\n        fn fmt() {}\n    }\n"#;\n'
    text += "\nfn main() {\n    compile(PROBE);\n}\n"
    assert _definition_names(generic_definitions(text, "rust")) == [("PROBE",), ("main",)]


_RUST_ITEMS = """\
use std::fmt;

/// Makes a function.
#[macro_export]
macro_rules! make {
    ($name:ident) => {
        fn $name() -> u32 { 1 }
    };
}

/// Settings.
pub mod settings {
    /// The default size.
    pub const SIZE: usize = 8;

    /// Reads it.
    pub(crate) fn read() -> usize {
        SIZE
    }

    pub(super) unsafe fn write(v: usize) {
        drop(v);
    }
}

/// An alias.
pub type Result<T> = std::result::Result<T, Error>;

/// A limit.
pub static LIMIT: u32 = 10;

impl<T> Stack<T>
where
    T: fmt::Debug,
{
    /// Pushes.
    pub fn push(&mut self, v: T) {
        self.items.push(v);
    }
}
"""


def test_rust_items_are_named() -> None:
    """``pub(crate) fn read`` was named ``pub``; ``macro_rules! make`` was no definition but the ``fn $name`` in its
    body was; ``mod settings`` had no name; ``type``, ``static`` and ``const`` items went with the chunk before."""
    assert _definition_names(generic_definitions(_RUST_ITEMS, "rust")) == [
        ("make",),
        ("settings",),
        ("settings", "SIZE"),
        ("settings", "read"),
        ("settings", "write"),
        ("Result",),
        ("LIMIT",),
        ("Stack",),
        ("Stack", "push"),
    ]
    found = _paths("items.rs", _RUST_ITEMS)
    assert ("items > Result", "/// An alias.") in found and ("items > LIMIT", "/// A limit.") in found
    assert all("$name" not in path and not path.endswith("pub") for path, _ in found)


_RUST_BODY = "".join(f"    let step{i} = compute(step, {i});\n" for i in range(8))
_RUST_BIG_FN = f"""\
impl Parser {{
    /// Parses a group.
    fn parse_group(&self) -> Ast {{
{_RUST_BODY}        let (ast, frame) = match self.stack.pop() {{
            Some(Frame::Group(g)) => match g.kind {{
                Kind::Named => g,
            }},
            None => return Ast::empty(),
        }};
{_RUST_BODY}        if let Some(x) = ast.first() {{
            return x;
        }}
        unsafe {{
            ast.raw()
        }}
    }}
}}
"""


def test_rust_expressions_in_a_body_are_no_definitions() -> None:
    """A too-large function was walked for nested definitions, and ``let (a, b) = match x {``, ``Some(..) =>
    match .. {`` were taken for them: chunks named ``let``, ``Some``, ``match``."""
    assert _definition_names(generic_definitions(_RUST_BIG_FN, "rust")) == [("Parser",), ("Parser", "parse_group")]
    found = _paths("parse.rs", _RUST_BIG_FN, chunk_size=400)
    assert {path for path, _ in found[:-1]} == {"parse > Parser > parse_group"}
    assert found[-1] in (("parse > Parser", "}"), ("parse > Parser > parse_group", "}"))


_GO_BODY = "".join(f"\tstep{i} := compute(step, {i})\n" for i in range(8))
_GO_CLOSURES = f"""\
package cobra

// Run runs the command.
func (c *Command) Run(args []string) error {{
{_GO_BODY}\tdefer func() {{
\t\trecover()
\t}}()
\tcmd := &Command{{
\t\tPreRun: func(_ *Command, args []string) {{
\t\t\tcount++
\t\t}},
\t}}
\tsort.Slice(args, func(i, j int) bool {{
\t\treturn args[i] < args[j]
\t}})
{_GO_BODY}\treturn cmd.Execute()
}}

// Stop stops it.
func Stop() {{
}}
"""


def test_go_function_literals_are_no_definitions() -> None:
    """``defer func() {``, ``PreRun: func(...) {`` and ``func(i, j int) bool {`` inside a function were nested
    definitions: a large function came out as three-line chunks named ``func`` or ``int > bool``."""
    assert _definition_names(generic_definitions(_GO_CLOSURES, "go")) == [("Command", "Run"), ("Stop",)]
    paths = {path for path, _ in _paths("command.go", _GO_CLOSURES, chunk_size=300)}
    assert paths == {"command > Command > Run", "command > Stop"}


_GO_DECLARATIONS = """\
package cmp

// Start starts c.
func (c *Client) Start() error {
\treturn nil
}

// Greeting is a raw string with a brace.
const Greeting = `hello {
world`

// ErrClosed is returned when closed.
var ErrClosed = errors.New("closed")

type (
\t// Point is a point.
\tPoint struct{ X, Y int }

\t// Size is a size.
\tSize int
)

// Stop stops c.
func (c Client) Stop() {
\tfmt.Println(`\\`)
}
"""


def test_go_var_const_and_grouped_types_are_definitions() -> None:
    """A documented ``const``/``var`` was no definition: its doc and value joined the function before (named after
    it); a ``type (...)`` group had no names and ended at the first ``}`` inside it."""
    assert _definition_names(generic_definitions(_GO_DECLARATIONS, "go")) == [
        ("Client", "Start"),
        ("Greeting",),
        ("ErrClosed",),
        (),
        ("Point",),
        ("Size",),
        ("Client", "Stop"),
    ]
    found = _paths("client.go", _GO_DECLARATIONS, chunk_size=80)
    assert ("client > Greeting", "// Greeting is a raw string with a brace.") in found
    assert ("client > ErrClosed", "// ErrClosed is returned when closed.") in found
    assert ("client > Size", "// Size is a size.") in found
    assert found[-1] == ("client > Client > Stop", "// Stop stops c.")


def test_go_raw_strings_have_no_escapes() -> None:
    """A Go raw string takes no backslash escapes: `` `\\` `` ended there, not at the next backquote."""
    code = "var sep = `\\`\nfunc f() {\n\tg(`}`)\n}\n"
    scan = Scan(code, "go")
    assert [code[s:e] for s, e, _ in scan.skipped] == ["`\\`", "`}`"]


def test_rust_mod_rs_is_named_after_its_folder() -> None:
    """``src/ast/mod.rs`` and ``src/hir/mod.rs`` both cited ``mod > Literal``: a ``mod.rs`` is its folder's module."""
    text = "pub struct Literal {\n    c: char,\n}\n"
    assert [c.header_path for c in chunks("src/ast/mod.rs", text)] == ["ast > Literal"]
    assert [c.header_path for c in chunks("lib.rs", text)] == ["lib > Literal"]


def test_a_doc_comment_too_long_to_join_its_definition_is_named_after_it() -> None:
    """A doc comment that does not fit with its definition was split under the file's name alone (go-cmp's
    ``Equal``: 60 lines of doc cited as ``compare``), so a question its doc answers cited no definition."""
    doc = "".join(f"// Equal rule {i}: values of kind {i} compare by their fields, recursively.\n" for i in range(30))
    text = f"package cmp\n\nimport \"fmt\"\n\n{doc}func Equal(x, y interface{{}}) bool {{\n\treturn x == y\n}}\n"
    found = chunks("compare.go", text)
    assert found[0].header_path == "compare"
    assert [c.header_path for c in found[1:]] == ["compare > Equal"] * (len(found) - 1)
    assert found[-1].content.startswith("func Equal(") or "func Equal(" in found[-1].content


def test_rust_array_types_and_impls_for_references() -> None:
    """``fn encode(cp: u32) -> [u8; 3] {`` ended at its own line (the array type's ``;`` read as a declaration's), and
    ``impl<'a> IntoIterator for &'a Group`` was named after the trait, not the type."""
    text = (
        "fn encode(cp: u32) -> [u8; 3] {\n    const TAG: u8 = 0b1000_0000;\n    [TAG, TAG, TAG]\n}\n\n"
        "impl<'a, K> IntoIterator for &'a mut Group<K> {\n    fn into_iter(self) -> Iter<'a, K> {\n"
        "        self.iter()\n    }\n}\n"
    )
    definitions = generic_definitions(text, "rust")
    assert _definition_names(definitions) == [("encode",), ("Group",), ("Group", "into_iter")]
    assert text[definitions[0].start : definitions[0].end].endswith("[TAG, TAG, TAG]\n}\n")


def test_rust_impl_trait_and_mod_blocks_are_chunked_as_their_items() -> None:
    """A small ``impl`` was one chunk named after its type: its methods (``Literal::is_cut``) were named nowhere
    and shared one vector (name questions 0.485 against 0.670 nDCG@10 for methods with chunks of their own). Each
    item now has its chunk, the block's first line with the first item and its closing brace with the last, as a
    Go method does."""
    text = (
        "/// A literal.\nimpl Literal {\n    type Item = u8;\n\n    /// Whether it was cut.\n"
        "    pub fn is_cut(&self) -> bool {\n        self.cut\n    }\n\n"
        "    pub fn cut(&mut self) {\n        self.cut = true;\n    }\n}\n\n"
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn cuts() {\n        assert!(true);\n    }\n}\n"
    )
    found = [(c.header_path, c.content) for c in chunks("literal.rs", text)]
    paths = ["literal > Literal > is_cut", "literal > Literal > cut", "literal > tests > cuts"]
    assert [path for path, _ in found] == paths
    assert found[0][1].startswith("/// A literal.\nimpl Literal {\n    type Item = u8;")
    assert found[1][1].endswith("self.cut = true;\n    }\n}")
    assert found[2][1].startswith("#[cfg(test)]\nmod tests {") and found[2][1].endswith("}\n}")


def test_rust_an_attribute_over_several_lines_goes_with_its_item() -> None:
    """``#[cfg(all(\\n    feature = "std",\\n))]`` above a function (11 in regex-syntax's tests): the lead stopped at
    its last line, so the attribute and the doc above it went to the chunk before."""
    text = (
        "/// Fixed buffer.\npub struct Buf {\n    data: [u8; 4],\n}\n\n"
        '/// Makes one.\n#[cfg(any(\n    feature = "std",\n    feature = "alloc",\n))]\n#[inline]\n'
        "pub fn make() -> Buf {\n    Buf { data: [0; 4] }\n}\n"
    )
    found = _paths("buf.rs", text)
    assert found == [("buf > Buf", "/// Fixed buffer."), ("buf > make", "/// Makes one.")]


def test_an_undocumented_value_stays_with_the_code_around_it() -> None:
    """Go's ``var minNamePadding = 11`` as a chunk of its own, named after itself, outranked ``NamePadding`` for
    "NamePadding" (Go vector arm -0.010 nDCG@10): a value is a definition only where a comment documents it."""
    go = (
        "func (c *Command) Len() int {\n\treturn 0\n}\n\nvar minNamePadding = 11\n\n"
        "// NamePadding returns padding.\nfunc (c *Command) NamePadding() int {\n\treturn minNamePadding\n}\n\n"
        "var (\n\tlimit = 3\n\t// step is the step.\n\tstep = 2\n)\n"
    )
    assert _definition_names(generic_definitions(go, "go")) == [
        ("Command", "Len"),
        ("Command", "NamePadding"),
        (),
        ("step",),
    ]
    assert _paths("command.go", go)[0] == ("command > Command > Len", "func (c *Command) Len() int {")
    rust = "const LIMIT: u32 = 3;\n\n/// The step.\npub static STEP: u32 = 2;\n\nconst fn twice() -> u32 {\n    2\n}\n"
    assert _definition_names(generic_definitions(rust, "rust")) == [("STEP",), ("twice",)]


_RUST_MACROS = """\
/// Implements `Next` for tuples.
macro_rules! impl_next (
    () => (); // stop

    ($A:ident, $($B:ident,)*) => (
        impl<$A, $($B),*> Next for ($A, $($B,)*) {
            fn next(&mut self) -> Option<$A> {
                None
            }
        }
        impl_next!($($B,)*);
    );
);

/// Squares.
macro_rules! square [
    ($x:expr) => { $x * $x };
    ($x:expr, $y:expr) => { square!($x) + square!($y) };
];

/// Doubles.
macro_rules! double {
    ($x:expr) => { 2 * $x };
}

impl_next!(A, B, C,);

/// Adds.
pub fn add(a: u32, b: u32) -> u32 {
    a + b
}
"""


def test_rust_macro_rules_in_parens_or_brackets_ends_at_its_closing_delimiter() -> None:
    """``macro_rules! m ( ... );`` (itertools' ``impl_cons_iter!``) ended at its first rule's ``;``: the ``impl``
    and ``fn`` of its later rules became definitions of their own, and ``m [ ... ];`` lost every rule after its
    first. Rust allows all three delimiters; each macro is one definition to its closing one."""
    definitions = generic_definitions(_RUST_MACROS, "rust")
    assert _definition_names(definitions) == [("impl_next",), ("square",), ("double",), ("add",)]
    ends = [_RUST_MACROS[d.start : d.end].rsplit("\n", 2)[1] for d in definitions]
    assert ends == [");", "];", "}", "}"]
    found = [(c.header_path, c.content) for c in chunks("tuples.rs", _RUST_MACROS)]
    assert [path for path, _ in found] == ["tuples > impl_next", "tuples > square", "tuples > double", "tuples > add"]
    assert found[0][1].startswith("/// Implements `Next` for tuples.\nmacro_rules! impl_next (\n")
    assert found[0][1].endswith("        impl_next!($($B,)*);\n    );\n);")
    assert found[1][1].endswith("square!($y) };\n];")
    assert found[2][1].endswith("}\n\nimpl_next!(A, B, C,);")
