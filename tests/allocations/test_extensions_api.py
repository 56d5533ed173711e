"""`requests/{id}/extend` answers 200 extended or 202 waiting for a lead; `extensions/` lists
what each persona may see; approve, reject and cancel are transitions (409 when not pending)."""

import pytest

from portal.allocations.models import ExtensionState, GpuRequest, GpuRequestExtension
from portal.allocations.services import gpu_request_submit
from portal.core.models import AuditEvent


@pytest.fixture
def allocation(developer, a100_tenant, catalog) -> GpuRequest:
    return gpu_request_submit(
        actor=developer,
        tenant=a100_tenant,
        offering=catalog["a100-80gb-whole"],
        count=1,
        duration_hours=4,
    )


def extend(client, allocation, key: str = "", **body):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(
        f"/api/v1/requests/{allocation.pk}/extend", body, content_type="application/json", **headers
    )


def test_extend_answers_200_at_once_202_for_a_lead_and_422_without_a_reason(
    client_for, developer, allocation
) -> None:
    client = client_for(developer)

    at_once = extend(client, allocation, hours=2)
    no_reason = extend(client, allocation, hours=12)
    waiting = extend(client, allocation, hours=12, reason="a day-long training run")
    again = extend(client, allocation, hours=12, reason="a day-long training run")

    assert at_once.status_code == 200
    assert at_once.json()["duration_hours"] == 6
    assert no_reason.status_code == 422
    assert no_reason.json()["error"]["code"] == "refused_by_policy"
    assert "hours" in no_reason.json()["error"]["fields"]
    assert waiting.status_code == 202
    body = waiting.json()
    assert body["state"] == "pending"
    assert body["request"] == allocation.pk
    assert body["hours"] == 12
    assert body["reason"] == "a day-long training run"
    assert body["requested_by"] == "dev"
    assert body["tenant"] == "vision"
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"


def test_a_retry_with_the_same_idempotency_key_replays_the_202(
    client_for, developer, allocation
) -> None:
    client = client_for(developer)

    first = extend(client, allocation, hours=12, reason="retry me", key="ext-1")
    second = extend(client, allocation, hours=12, reason="retry me", key="ext-1")

    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json() == second.json()
    assert GpuRequestExtension.objects.count() == 1


def test_each_persona_lists_and_reads_what_it_may_see(
    client_for, developer, lead, outsider, finance_user, admin_user, allocation
) -> None:
    extension_id = extend(client_for(developer), allocation, hours=12, reason="why").json()["id"]

    def listed(user, query: str = "") -> list[int]:
        response = client_for(user).get(f"/api/v1/extensions/{query}")
        assert response.status_code == 200
        return [row["id"] for row in response.json()["results"]]

    assert listed(developer) == [extension_id]
    assert listed(lead) == [extension_id]
    assert listed(finance_user) == [extension_id]
    assert listed(admin_user, "?state=pending&tenant=vision") == [extension_id]
    assert listed(admin_user, "?state=approved") == []
    assert listed(lead, "?mine=true") == []
    assert listed(outsider) == []
    assert client_for(outsider).get(f"/api/v1/extensions/{extension_id}/").status_code == 404
    assert client_for(lead).get(f"/api/v1/extensions/{extension_id}/").json()["hours"] == 12
    bad = client_for(lead).get("/api/v1/extensions/?state=maybe")
    assert bad.status_code == 400
    assert "state" in bad.json()["error"]["fields"]


def test_decisions_are_transitions_outsiders_get_404_and_invalid_ones_409(
    client_for, developer, lead, outsider, admin_user, allocation
) -> None:
    extension_id = extend(client_for(developer), allocation, hours=12, reason="why").json()["id"]
    url = f"/api/v1/extensions/{extension_id}"

    by_outsider = client_for(outsider).post(f"{url}/approve")
    by_developer = client_for(developer).post(f"{url}/approve")
    approved = client_for(lead).post(
        f"{url}/approve", {"comment": "go"}, content_type="application/json"
    )
    twice = client_for(admin_user).post(f"{url}/approve")
    reject_late = client_for(lead).post(f"{url}/reject")
    cancel_late = client_for(developer).post(f"{url}/cancel")

    assert by_outsider.status_code == 404
    assert by_developer.status_code == 403
    assert approved.status_code == 200
    assert approved.json()["state"] == "approved"
    assert approved.json()["decided_by"] == "lead"
    assert approved.json()["decision_comment"] == "go"
    assert twice.status_code == 409
    assert twice.json()["error"]["code"] == "invalid_transition"
    assert reject_late.status_code == 409
    assert cancel_late.status_code == 409
    allocation.refresh_from_db()
    assert allocation.duration_hours == 16
    assert approved.json()["request_ends_at"] is not None
    assert AuditEvent.objects.filter(action="gpu_request.extension_approved").count() == 1


def test_approving_after_the_allocation_ended_is_409(
    client_for, developer, lead, allocation
) -> None:
    extension_id = extend(client_for(developer), allocation, hours=12, reason="why").json()["id"]
    client_for(developer).post(f"/api/v1/requests/{allocation.pk}/release")

    late = client_for(lead).post(f"/api/v1/extensions/{extension_id}/approve")

    assert late.status_code == 409
    assert GpuRequestExtension.objects.get().state == ExtensionState.CANCELLED


def test_the_schema_documents_the_extension_answers(client_for, developer) -> None:
    schema = client_for(developer).get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    paths = schema.json()["paths"]

    extend_answers = paths["/api/v1/requests/{id}/extend"]["post"]["responses"]
    assert {"200", "202", "400", "403", "404", "409", "422"} <= set(extend_answers)
    assert extend_answers["202"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/GpuRequestExtension"
    )
    assert "reason" in schema.json()["components"]["schemas"]["ExtendRequest"]["properties"]
    listed = paths["/api/v1/extensions/"]["get"]
    assert {"state", "tenant", "mine", "sort", "page"} <= {p["name"] for p in listed["parameters"]}
    approve = paths["/api/v1/extensions/{id}/approve"]["post"]["responses"]
    assert {"200", "403", "404", "409"} <= set(approve)
    assert "422" not in approve
