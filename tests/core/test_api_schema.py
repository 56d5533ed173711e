"""The OpenAPI schema documents every answer: errors with the envelope, pages, nulls."""

from typing import Any

import pytest

ERROR_REF = "#/components/schemas/Error"


@pytest.fixture
def schema(client_for, developer) -> dict[str, Any]:
    answer = client_for(developer).get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def _operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }


def _error_schema(operation: dict[str, Any], status: str) -> str:
    return str(operation["responses"][status]["content"]["application/json"]["schema"]["$ref"])


def test_every_authenticated_operation_documents_401_and_429_with_the_error_envelope(
    schema,
) -> None:
    operations = _operations(schema)

    assert len(operations) >= 70
    for key, operation in operations.items():
        assert operation["security"], key
        for status in ("401", "429"):
            assert _error_schema(operation, status) == ERROR_REF, (key, status)
        assert "Retry-After" in operation["responses"]["429"]["headers"], key
    envelope = schema["components"]["schemas"]["Error"]
    assert envelope["required"] == ["error"]
    assert envelope["properties"]["error"]["required"] == ["code", "message", "fields"]


def test_objects_writes_and_bodies_document_their_errors(schema) -> None:
    operations = _operations(schema)

    request = operations[("get", "/api/v1/requests/{id}/")]
    assert {"400", "403", "404"} <= set(request["responses"])
    approve = operations[("post", "/api/v1/requests/{id}/approve")]
    assert {"400", "403", "404", "409", "413"} <= set(approve["responses"])
    assert "422" not in approve["responses"]
    extend = operations[("post", "/api/v1/requests/{id}/extend")]
    assert _error_schema(extend, "422") == ERROR_REF
    assert "hours" in schema["components"]["schemas"]["ExtendRequest"]["required"]
    assert "404" not in operations[("get", "/api/v1/me")]["responses"]
    assert "400" not in operations[("get", "/api/v1/me")]["responses"]


def test_lists_are_pages_and_downloads_have_their_content_types(schema) -> None:
    operations = _operations(schema)

    users = operations[("get", "/api/v1/users/")]["responses"]["200"]["content"]
    assert users["application/json"]["schema"]["$ref"].endswith("/PaginatedUserList")
    audit = operations[("get", "/api/v1/audit-events/")]["responses"]["200"]["content"]
    assert set(audit) == {"application/json", "text/csv"}
    assert audit["application/json"]["schema"]["$ref"].endswith("/PaginatedAuditEventList")
    lines = operations[("get", "/api/v1/statements/{statement_id}/lines/")]
    assert len(lines["responses"]["200"]["content"]) == 3


def test_fields_that_can_be_null_are_declared_nullable(schema) -> None:
    components = schema["components"]["schemas"]

    assert components["AuditEvent"]["properties"]["tenant"]["nullable"] is True
    assert components["RateCard"]["properties"]["backend"]["nullable"] is True
    assert components["RateCard"]["properties"]["created_by"]["nullable"] is True
    assert components["Period"]["properties"]["closed_by"]["nullable"] is True
    assert components["Budget"]["properties"]["updated_by"]["nullable"] is True


def test_path_parameters_say_what_their_urls_accept(schema) -> None:
    parameters = {
        parameter["name"]: parameter["schema"]
        for parameter in _operations(schema)[
            ("post", "/api/v1/tenants/{slug}/quota-requests/{id}/approve")
        ]["parameters"]
        if parameter["in"] == "path"
    }

    assert parameters["slug"]["pattern"] == "^[-a-zA-Z0-9_]+$"
    assert parameters["id"]["minimum"] == 0
