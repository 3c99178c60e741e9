"""The ``code`` strategy on the cases audit 56b found wrong (its defects D3-D15), one test per rule."""

from __future__ import annotations

import pytest

from rag_service.ingest.chunk import TextChunk
from rag_service.ingest.chunkers import make_chunker
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
