"""A sentence-transformers model that defines query and document prompts gets them (e5's "query: " / "passage: ").

The bundled MiniLM, copied with prompts added to its ``config_sentence_transformers.json``: a query is embedded as
the prompt plus the query, a chunk as the document prompt plus the chunk, and the model's id says so, so vectors
made with and without the prompts are never mixed. The bundled model itself (no prompts) is unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_service.embed import BUNDLED_MINILM_ID, SentenceTransformerEmbedder, bundled_model_path

QUERY = "Which environment variable selects the reranking model?"
CHUNK = "RAG_RERANK_MODEL names the cross-encoder; none turns reranking off."


@pytest.fixture(scope="module")
def prompted_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("prompted") / "minilm"
    shutil.copytree(bundled_model_path(), folder)
    config = folder / "config_sentence_transformers.json"
    settings = json.loads(config.read_text())
    config.write_text(json.dumps(settings | {"prompts": {"query": "query: ", "passage": "passage: "}}))
    return folder


def test_a_models_prompts_are_given_to_queries_and_documents(prompted_model: Path) -> None:
    prompted, plain = SentenceTransformerEmbedder(str(prompted_model)), SentenceTransformerEmbedder()
    assert prompted.model_id == f"{prompted_model}+prompts" and plain.model_id == BUNDLED_MINILM_ID
    np.testing.assert_allclose(prompted.embed_query(QUERY), plain.embed_query(f"query: {QUERY}"), atol=1e-5)
    np.testing.assert_allclose(prompted.embed_documents([CHUNK])[0], plain.embed_query(f"passage: {CHUNK}"), atol=1e-5)
    assert float(prompted.embed_query(QUERY) @ plain.embed_query(QUERY)) < 0.99  # the prompt changed the vector
