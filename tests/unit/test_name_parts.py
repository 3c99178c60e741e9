"""``keyword_text.name_parts``: the words the parser does not make of a code chunk's names."""

from __future__ import annotations

import pytest

from rag_service.db.chunk_text import keyword_prefix, search_prefix
from rag_service.keyword_text import name_parts


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("ds.repartition(8)", "ds repartition"),
        ("tf.keras.Model", "tf keras Model"),
        ("getBitsBase2, HTTPServer, XMLHttpRequest", "get Bits Base2 HTTP Server XML Http Request"),
        ("f(x).hybridSearch(q)", "hybrid Search"),  # a method after a call
        ("MyClass-method", "My Class method"),
        ("Queue<Widget> <T>", "Widget T"),  # bare <name>s, which the parser drops as tags
        ("ds.map(f); ds.map(g)", "ds map ds map"),  # as often as they occur
        # none: plain words, snake_case (the parser splits it), numbers, paths, URLs, tags with attributes
        ("plain words and snake_case_names", ""),
        ("version 3.14 and e-mail", ""),
        ("/opt/MyApp/run.sh https://x.io/a.html <div class='x'>", ""),
        ("naïveBayes", ""),  # part of a word with letters outside ASCII
    ],
)
def test_the_parts_of_dotted_and_camel_case_names_and_bare_tags(text, parts):
    assert name_parts(text) == parts


def test_only_code_documents_read_their_names_parts_every_document_its_bare_tags():
    code = keyword_prefix("data.py", "data > shuffle", "", "ds.repartition(8)", chunker="code:1500:0:50:v10:tsv4:np")
    assert code == "data.py\ndata > shuffle\ndata py ds repartition"
    docs = keyword_prefix("Guide", "Guide > Shuffle", "", "ds.repartition(8)", chunker="markdown:500:100:50:v10:tsv4")
    assert docs == search_prefix("Guide", "Guide > Shuffle") == "Guide > Shuffle"
    tagged = keyword_prefix("", "", "", "ray://<head_node_host>:10001 <b class='x'>", chunker="markdown:500:100")
    assert tagged == "head_node_host"
