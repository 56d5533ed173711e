from fractions import Fraction

import pytest

from portal.catalog.presets import catalog_presets_load
from tenants.models import Membership, Quota, QuotaRequest
from tenants.services import quota_request_create, quota_set, tenant_create
from tests.tenants.factories import a100


@pytest.fixture
def a100_model(admin_user):
    return a100(admin_user)


def test_anonymous_callers_get_401(client, db) -> None:
    response = client.get("/api/v1/tenants/")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_each_persona_lists_the_tenants_it_may_see(
    client_for, developer, lead, outsider, finance_user, admin_user, tenant_a, tenant_b
) -> None:
    def slugs(user):
        return [
            tenant["slug"] for tenant in client_for(user).get("/api/v1/tenants/").json()["results"]
        ]

    assert slugs(developer) == ["vision"]
    assert slugs(lead) == ["vision"]
    assert slugs(outsider) == ["nlp"]
    assert slugs(finance_user) == ["nlp", "vision"]
    assert slugs(admin_user) == ["nlp", "vision"]


def test_outsider_gets_404_for_every_tenant_scoped_endpoint(
    client_for, outsider, tenant_a, lead, a100_model
) -> None:
    quota_request = quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=a100_model, amount=1, reason="x"
    )
    client = client_for(outsider)
    base = "/api/v1/tenants/vision"

    responses = [
        client.get(f"{base}/"),
        client.patch(f"{base}/", {"name": "mine"}, content_type="application/json"),
        client.get(f"{base}/members/"),
        client.post(f"{base}/members/", {"username": "outsider", "role": "lead"}),
        client.delete(f"{base}/members/dev/"),
        client.get(f"{base}/quota-requests/"),
        client.post(
            f"{base}/quota-requests/", {"gpu_model": "a100-80gb", "amount": "1", "reason": "x"}
        ),
        client.post(f"{base}/quota-requests/{quota_request.pk}/approve"),
        client.post(f"{base}/quota-requests/{quota_request.pk}/reject"),
    ]

    assert [response.status_code for response in responses] == [404] * len(responses)
    assert all(response.json()["error"]["code"] == "not_found" for response in responses)
    assert not Membership.objects.filter(user=outsider, tenant=tenant_a).exists()


def test_admin_creates_a_tenant_and_sets_exact_quotas(client_for, admin_user, a100_model) -> None:
    client = client_for(admin_user)

    created = client.post(
        "/api/v1/tenants/",
        {
            "slug": "genomics",
            "name": "Genomics",
            "cost_centre": "CC-1",
            "auto_approve_gpu_eq": "1/2",
        },
        content_type="application/json",
    )
    patched = client.patch(
        "/api/v1/tenants/genomics/",
        {"quotas": {"a100-80gb": "7/2"}, "max_duration_hours": 48},
        content_type="application/json",
    )

    assert created.status_code == 201
    assert created.json()["auto_approve_gpu_eq"] == "1/2"
    assert created.json()["namespace"] == "t-genomics"
    assert patched.status_code == 200
    body = patched.json()
    assert body["max_duration_hours"] == 48
    assert body["quotas"] == [
        {"gpu_model": "a100-80gb", "quota": "7/2", "used": "0", "remaining": "7/2",
         "remaining_display": "3.5"}
    ]  # fmt: skip


def test_non_admins_may_not_create_or_change_tenants(
    client_for, lead, finance_user, tenant_a
) -> None:
    created = client_for(finance_user).post("/api/v1/tenants/", {"slug": "x", "name": "X"})
    patched = client_for(lead).patch(
        "/api/v1/tenants/vision/", {"name": "Ours"}, content_type="application/json"
    )

    assert created.status_code == 403
    assert patched.status_code == 403
    tenant_a.refresh_from_db()
    assert tenant_a.name == "Computer Vision Lab"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"quotas": {"no-such-gpu": "1"}}, "quotas"),
        ({"quotas": {"a100-80gb": "two"}}, "quotas"),
        ({"auto_approve_gpu_eq": "-1"}, "auto_approve_gpu_eq"),
        ({"default_duration_hours": 500}, "default_duration_hours"),
        ({"state": "gone"}, "state"),
    ],
)
def test_bad_patches_name_the_field_and_change_nothing(
    client_for, admin_user, tenant_a, a100_model, body, field
) -> None:
    response = client_for(admin_user).patch(
        "/api/v1/tenants/vision/", body, content_type="application/json"
    )

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Quota.objects.exists()


def test_a_patch_that_fails_midway_changes_nothing(
    client_for, admin_user, tenant_a, a100_model
) -> None:
    client = client_for(admin_user)
    client.patch("/api/v1/tenants/vision/", {"state": "archived"}, content_type="application/json")

    response = client.patch(
        "/api/v1/tenants/vision/",
        {"quotas": {"a100-80gb": "2"}, "state": "suspended"},
        content_type="application/json",
    )

    assert response.status_code == 409
    assert "archived" in response.json()["error"]["message"]
    assert not Quota.objects.exists()


def test_lead_manages_members_developer_may_not(
    client_for, lead, developer, outsider, tenant_a
) -> None:
    added = client_for(lead).post(
        "/api/v1/tenants/vision/members/", {"username": "outsider", "role": "developer"}
    )
    refused = client_for(developer).post(
        "/api/v1/tenants/vision/members/", {"username": "dev", "role": "lead"}
    )
    removed = client_for(lead).delete("/api/v1/tenants/vision/members/outsider/")
    missing = client_for(lead).delete("/api/v1/tenants/vision/members/outsider/")
    unknown = client_for(lead).post(
        "/api/v1/tenants/vision/members/", {"username": "ghost", "role": "developer"}
    )
    bad_role = client_for(lead).post(
        "/api/v1/tenants/vision/members/", {"username": "outsider", "role": "owner"}
    )

    assert added.status_code == 200
    assert added.json()["role"] == "developer"
    assert refused.status_code == 403
    assert removed.status_code == 204
    assert missing.status_code == 404
    assert unknown.status_code == 404
    assert bad_role.status_code == 400
    assert "role" in bad_role.json()["error"]["fields"]
    members = client_for(developer).get("/api/v1/tenants/vision/members/").json()
    assert sorted(member["username"] for member in members["results"]) == ["dev", "lead"]


def test_quota_request_from_lead_to_admin_increases_the_quota_exactly(
    client_for, lead, admin_user, tenant_a, a100_model
) -> None:
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq="1/7")

    asked = client_for(lead).post(
        "/api/v1/tenants/vision/quota-requests/",
        {"gpu_model": "a100-80gb", "amount": "6/7", "reason": "fine-tuning"},
    )
    request_id = asked.json()["id"]
    approved = client_for(admin_user).post(
        f"/api/v1/tenants/vision/quota-requests/{request_id}/approve", {"comment": "granted"}
    )
    again = client_for(admin_user).post(
        f"/api/v1/tenants/vision/quota-requests/{request_id}/reject"
    )

    assert asked.status_code == 201
    assert asked.json()["state"] == "pending"
    assert approved.status_code == 200
    assert approved.json()["state"] == "approved"
    assert approved.json()["decided_by"] == "admin"
    assert Quota.objects.get(tenant=tenant_a).gpu_eq == Fraction(1)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "invalid_transition"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpu_model": "a100-80gb", "amount": "1"}, "reason"),
        ({"gpu_model": "a100-80gb", "amount": "two", "reason": "x"}, "amount"),
        ({"gpu_model": "a100-80gb", "amount": "0", "reason": "x"}, "amount"),
        ({"gpu_model": "nope", "amount": "1", "reason": "x"}, "gpu_model"),
    ],
)
def test_bad_quota_requests_name_the_field(
    client_for, lead, tenant_a, a100_model, body, field
) -> None:
    response = client_for(lead).post("/api/v1/tenants/vision/quota-requests/", body)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not QuotaRequest.objects.exists()


def test_developers_may_not_read_or_ask_for_quota(
    client_for, developer, tenant_a, a100_model
) -> None:
    client = client_for(developer)

    listed = client.get("/api/v1/tenants/vision/quota-requests/")
    asked = client.post(
        "/api/v1/tenants/vision/quota-requests/",
        {"gpu_model": "a100-80gb", "amount": "1", "reason": "x"},
    )

    assert listed.status_code == 403
    assert asked.status_code == 403


def test_lead_may_not_decide_quota_requests(client_for, lead, tenant_a, a100_model) -> None:
    quota_request = quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=a100_model, amount=1, reason="x"
    )

    response = client_for(lead).post(
        f"/api/v1/tenants/vision/quota-requests/{quota_request.pk}/approve"
    )

    assert response.status_code == 403


def test_pagination_bounds_the_page(client_for, admin_user) -> None:
    for number in range(7):
        tenant_create(actor=admin_user, slug=f"t{number}", name=f"T{number}")

    body = client_for(admin_user).get("/api/v1/tenants/?page_size=3&page=2").json()

    assert body["count"] == 7
    assert [tenant["slug"] for tenant in body["results"]] == ["t3", "t4", "t5"]


@pytest.mark.parametrize("count", [3, 30])
def test_tenant_list_queries_do_not_grow_with_tenants(
    client_for, admin_user, django_assert_num_queries, count
) -> None:
    catalog_presets_load(actor=admin_user)
    from portal.catalog.models import GpuModel  # noqa: PLC0415

    models = list(GpuModel.objects.all())
    for number in range(count):
        tenant = tenant_create(actor=admin_user, slug=f"team-{number}", name=f"Team {number}")
        for model in models[:2]:
            quota_set(actor=admin_user, tenant=tenant, gpu_model=model, gpu_eq=number + 1)
    client = client_for(admin_user)

    # session, user, count, page, allocations summed, quotas
    with django_assert_num_queries(6):
        response = client.get("/api/v1/tenants/?page_size=50")

    assert len(response.json()["results"]) == count
