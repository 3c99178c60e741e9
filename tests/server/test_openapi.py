"""Schemathesis against the served OpenAPI document: no input makes the server answer 5xx.

Every operation gets generated valid and invalid requests (bodies, query strings, path values)
with the write token, on this module's own database; responses must be 2xx-4xx, documented, and
match their schema. Hypothesis runs derandomized, so a failure reproduces.
"""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from schemathesis import Case, GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import WRITE_TOKEN, LiveServer

pytestmark = pytest.mark.slow  # every operation of the schema, generated: a long run (`make test`)

MAX_EXAMPLES = 40
CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@pytest.fixture(scope="module")
def api_schema(live: LiveServer) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json")


def test_openapi_document_is_served(live: LiveServer) -> None:
    with live.client() as client:
        document = client.get("/openapi.json").json()
    assert {"/api/rag/retrieve", "/api/documents", "/api/documents/reindex-all", "/api/jobs/{job_id}",
            "/api/collections", "/api/presets", "/api/presets/{context}", "/healthz", "/readyz",
            "/metrics"} <= set(document["paths"])


# schemathesis' own pytest plugin does not run under pytest 9 ('Function' has no '_nodeid'), so each
# operation's strategy is driven by hypothesis here, valid and invalid requests alike
@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_no_input_makes_a_5xx(api_schema: schemathesis.BaseSchema, mode: GenerationMode) -> None:
    headers = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    for result in api_schema.get_all_operations():
        operation = result.ok()
        raw = operation.definition.raw
        if mode is GenerationMode.NEGATIVE and not {"parameters", "requestBody", "security"} & set(raw):
            continue  # nothing to make invalid (/healthz, /readyz)

        @hypothesis.settings(
            max_examples=MAX_EXAMPLES,
            derandomize=True,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            database=None,
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        )
        @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
        def call(case: Case) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        call()
