"""Every API POST honours Idempotency-Key: a retry gets the first answer and writes nothing."""

import pytest

from portal.core.models import AuditEvent
from tenants.models import QuotaRequest, Tenant
from tests.tenants.factories import a100


def post(client, url, body, key):
    return client.post(url, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)


def test_creating_a_tenant_twice_with_one_key_creates_one(client_for, admin_user) -> None:
    client = client_for(admin_user)
    body = {"slug": "genomics", "name": "Genomics"}

    first = post(client, "/api/v1/tenants/", body, "create-genomics")
    retry = post(client, "/api/v1/tenants/", body, "create-genomics")

    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert Tenant.objects.filter(slug="genomics").count() == 1
    assert AuditEvent.objects.filter(action="tenant.create").count() == 1


def test_a_retried_quota_request_and_decision_happen_once(
    client_for, lead, admin_user, tenant_a
) -> None:
    a100(admin_user)
    body = {"gpu_model": "a100-80gb", "amount": "2", "reason": "training"}

    asked = post(client_for(lead), "/api/v1/tenants/vision/quota-requests/", body, "ask-1")
    post(client_for(lead), "/api/v1/tenants/vision/quota-requests/", body, "ask-1")
    url = f"/api/v1/tenants/vision/quota-requests/{asked.json()['id']}/approve"
    decided = post(client_for(admin_user), url, {"comment": "ok"}, "decide-1")
    retried = post(client_for(admin_user), url, {"comment": "ok"}, "decide-1")

    assert QuotaRequest.objects.count() == 1
    assert decided.status_code == retried.status_code == 200  # not 409: the first answer again
    assert retried["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("key", ["", "k" * 256])
def test_an_empty_key_is_ignored_and_an_overlong_one_refused(client_for, admin_user, key) -> None:
    response = post(client_for(admin_user), "/api/v1/tenants/", {"slug": "x", "name": "X"}, key)

    assert response.status_code == (201 if not key else 400)


def test_keys_belong_to_their_user(client_for, admin_user, lead, tenant_a) -> None:
    mine = post(client_for(admin_user), "/api/v1/tenants/", {"slug": "one", "name": "One"}, "same")
    theirs = post(client_for(lead), "/api/v1/tenants/", {"slug": "one", "name": "One"}, "same")

    assert mine.status_code == 201
    assert theirs.status_code == 403  # evaluated for the lead, not replayed from the admin
