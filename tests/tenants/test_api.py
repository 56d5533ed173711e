from fractions import Fraction

import pytest

from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import GpuModel, Offering
from portal.catalog.presets import catalog_presets_load
from tenants.models import MemberRole, Membership, Quota, QuotaRequest, QuotaRequestState
from tenants.services import membership_set, quota_request_create, quota_set, tenant_create
from tests.tenants.factories import a100


@pytest.fixture
def a100_model(admin_user):
    return a100(admin_user)


def _hold(tenant, user, offering, *, count: int) -> GpuRequest:
    """An allocation holding `count` units, approved at once (within quota and policy)."""
    allocation = gpu_request_submit(actor=user, tenant=tenant, offering=offering, count=count)
    assert allocation.state == RequestState.APPROVED, allocation.decision_comment
    return allocation


TENANT_A_ENDPOINTS = [
    ("get", "/api/v1/tenants/"),
    ("post", "/api/v1/tenants/"),
    ("get", "/api/v1/tenants/vision/"),
    ("patch", "/api/v1/tenants/vision/"),
    ("get", "/api/v1/tenants/vision/members/"),
    ("post", "/api/v1/tenants/vision/members/"),
    ("delete", "/api/v1/tenants/vision/members/dev/"),
    ("get", "/api/v1/tenants/vision/quota-requests/"),
    ("post", "/api/v1/tenants/vision/quota-requests/"),
    ("post", "/api/v1/tenants/vision/quota-requests/1/approve"),
    ("post", "/api/v1/tenants/vision/quota-requests/1/reject"),
]


@pytest.mark.parametrize(("method", "url"), TENANT_A_ENDPOINTS)
def test_anonymous_callers_get_401(client, tenant_a, developer, method, url) -> None:
    response = getattr(client, method)(url)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert Membership.objects.filter(tenant=tenant_a).count() == 1


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
    assert unknown.status_code == 400
    assert "username" in unknown.json()["error"]["fields"]
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
    models = list(GpuModel.objects.all())
    for number in range(count):
        tenant = tenant_create(actor=admin_user, slug=f"team-{number}", name=f"Team {number}")
        for model in models[:2]:
            quota_set(actor=admin_user, tenant=tenant, gpu_model=model, gpu_eq=number + 1)
        _hold(tenant, admin_user, Offering.objects.filter(gpu_model=models[0]).first(), count=1)
    client = client_for(admin_user)
    client.get("/api/v1/tenants/")  # the process reads the catalog once (catalog/cache.py)

    # session, user, page (shorter than a page: counted from its rows), allocations summed,
    # quotas (their GPU models from the process's catalog rows)
    with django_assert_num_queries(5):
        response = client.get("/api/v1/tenants/?page_size=50")

    assert len(response.json()["results"]) == count


def test_tenant_list_filters_by_state_and_search(
    client_for, admin_user, tenant_a, tenant_b
) -> None:
    client = client_for(admin_user)
    client.patch("/api/v1/tenants/nlp/", {"state": "suspended"}, content_type="application/json")

    def slugs(query: str) -> list[str]:
        body = client.get(f"/api/v1/tenants/?{query}").json()
        return [tenant["slug"] for tenant in body["results"]]

    assert slugs("state=suspended") == ["nlp"]
    assert slugs("state=active") == ["vision"]
    assert slugs("search=VIS") == ["vision"]
    assert slugs("search=language") == ["nlp"]
    assert slugs("search=") == ["nlp", "vision"]


def test_an_unknown_state_filter_is_bad_input_naming_state(client_for, admin_user) -> None:
    response = client_for(admin_user).get("/api/v1/tenants/?state=gone")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert "state" in response.json()["error"]["fields"]


@pytest.mark.parametrize("persona", ["developer", "lead", "finance_user", "admin_user"])
def test_viewers_read_one_tenant_with_its_quotas(
    request, client_for, admin_user, tenant_a, a100_model, persona
) -> None:
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq="1/7")

    response = client_for(request.getfixturevalue(persona)).get("/api/v1/tenants/vision/")

    assert response.status_code == 200
    body = response.json()
    assert body["slug"] == "vision"
    assert body["cost_centre"] == "CC-4100"
    assert body["quotas"][0]["quota"] == "1/7"
    assert body["quotas"][0]["remaining_display"] == "0.14"


def test_remaining_subtracts_what_allocations_hold_exactly(
    client_for, developer, admin_user, tenant_a, a100_model
) -> None:
    catalog_presets_load(actor=admin_user)
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq=1)
    _hold(tenant_a, developer, Offering.objects.get(slug="a100-80gb-mig-1g-10gb"), count=2)

    body = client_for(developer).get("/api/v1/tenants/vision/").json()

    assert body["quotas"] == [
        {"gpu_model": "a100-80gb", "quota": "1", "used": "2/7", "remaining": "5/7",
         "remaining_display": "0.71"}
    ]  # fmt: skip


@pytest.mark.parametrize("persona", ["developer", "lead", "finance_user"])
def test_only_admins_create_tenants(request, client_for, tenant_a, persona) -> None:
    response = client_for(request.getfixturevalue(persona)).post(
        "/api/v1/tenants/", {"slug": "rogue", "name": "Rogue"}, content_type="application/json"
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    admin = request.getfixturevalue("admin_user")
    assert client_for(admin).get("/api/v1/tenants/rogue/").status_code == 404


@pytest.mark.parametrize("persona", ["developer", "lead", "finance_user"])
def test_only_admins_patch_tenants(request, client_for, tenant_a, a100_model, persona) -> None:
    response = client_for(request.getfixturevalue(persona)).patch(
        "/api/v1/tenants/vision/",
        {"quotas": {"a100-80gb": "8"}, "state": "suspended"},
        content_type="application/json",
    )

    assert response.status_code == 403
    tenant_a.refresh_from_db()
    assert tenant_a.state == "active"
    assert not Quota.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"slug": "vision", "name": "Again"}, 409, "slug"),
        ({"slug": "Not A Slug", "name": "Bad"}, 400, "slug"),
        ({"slug": "no-name"}, 400, "name"),
        ({"slug": "floaty", "name": "F", "auto_approve_gpu_eq": 0.5}, 400, "auto_approve_gpu_eq"),
    ],
)
def test_bad_tenant_creations_name_the_field(
    client_for, admin_user, tenant_a, body, status, field
) -> None:
    response = client_for(admin_user).post(
        "/api/v1/tenants/", body, content_type="application/json"
    )

    assert response.status_code == status
    assert field in response.json()["error"]["fields"]
    assert client_for(admin_user).get("/api/v1/tenants/").json()["count"] == 1


def test_admin_suspends_and_reactivates_a_tenant(client_for, admin_user, tenant_a) -> None:
    client = client_for(admin_user)

    suspended = client.patch(
        "/api/v1/tenants/vision/", {"state": "suspended"}, content_type="application/json"
    )
    reactivated = client.patch(
        "/api/v1/tenants/vision/", {"state": "active"}, content_type="application/json"
    )

    assert suspended.json()["state"] == "suspended"
    assert reactivated.json()["state"] == "active"


def test_admin_manages_members_and_a_lead_changes_a_role(
    client_for, admin_user, lead, developer, outsider, tenant_a
) -> None:
    added = client_for(admin_user).post(
        "/api/v1/tenants/vision/members/", {"username": "outsider", "role": "lead"}
    )
    changed = client_for(lead).post(
        "/api/v1/tenants/vision/members/", {"username": "outsider", "role": "developer"}
    )

    assert added.status_code == 200
    assert changed.status_code == 200
    assert changed.json() == {
        "username": "outsider", "full_name": "Outsider Tester", "role": "developer",
        "created_at": added.json()["created_at"],
    }  # fmt: skip
    assert Membership.objects.get(tenant=tenant_a, user=outsider).role == MemberRole.DEVELOPER


def test_finance_reads_members_but_may_not_change_them(
    client_for, finance_user, developer, tenant_a
) -> None:
    client = client_for(finance_user)

    listed = client.get("/api/v1/tenants/vision/members/")
    added = client.post("/api/v1/tenants/vision/members/", {"username": "finance", "role": "lead"})
    removed = client.delete("/api/v1/tenants/vision/members/dev/")

    assert listed.status_code == 200
    assert [member["username"] for member in listed.json()["results"]] == ["dev"]
    assert added.status_code == 403
    assert removed.status_code == 403
    assert Membership.objects.filter(tenant=tenant_a).count() == 1


def test_developer_may_not_remove_members(client_for, developer, lead, tenant_a) -> None:
    response = client_for(developer).delete("/api/v1/tenants/vision/members/lead/")

    assert response.status_code == 403
    assert Membership.objects.filter(tenant=tenant_a, user=lead).exists()


@pytest.mark.parametrize("persona", ["lead", "finance_user", "admin_user"])
def test_leads_finance_and_admins_read_quota_requests(
    request, client_for, lead, tenant_a, a100_model, persona
) -> None:
    quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=a100_model, amount="1/2", reason="training"
    )

    response = client_for(request.getfixturevalue(persona)).get(
        "/api/v1/tenants/vision/quota-requests/"
    )

    assert response.status_code == 200
    [item] = response.json()["results"]
    assert item["gpu_model"] == "a100-80gb"
    assert item["amount"] == "1/2"
    assert item["amount_display"] == "0.5"
    assert item["requested_by"] == "lead"
    assert item["decided_by"] is None


@pytest.mark.parametrize("persona", ["finance_user", "admin_user"])
def test_only_the_tenants_leads_ask_for_quota(
    request, client_for, tenant_a, a100_model, persona
) -> None:
    response = client_for(request.getfixturevalue(persona)).post(
        "/api/v1/tenants/vision/quota-requests/",
        {"gpu_model": "a100-80gb", "amount": "1", "reason": "x"},
    )

    assert response.status_code == 403
    assert not QuotaRequest.objects.exists()


def test_a_float_amount_is_refused_naming_the_field(client_for, lead, tenant_a, a100_model) -> None:
    response = client_for(lead).post(
        "/api/v1/tenants/vision/quota-requests/",
        {"gpu_model": "a100-80gb", "amount": 0.5, "reason": "x"},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "amount" in response.json()["error"]["fields"]


def test_approving_twice_answers_409_and_adds_the_quota_once(
    client_for, lead, admin_user, tenant_a, a100_model
) -> None:
    quota_request = quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=a100_model, amount="7/2", reason="x"
    )
    url = f"/api/v1/tenants/vision/quota-requests/{quota_request.pk}/approve"

    first = client_for(admin_user).post(url)
    second = client_for(admin_user).post(url)

    assert first.status_code == 200
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "invalid_transition"
    quotas = client_for(lead).get("/api/v1/tenants/vision/").json()["quotas"]
    assert [(line["quota"], line["remaining"]) for line in quotas] == [("7/2", "7/2")]


def test_admin_rejects_a_quota_request_and_the_quota_stays(
    client_for, lead, admin_user, tenant_a, a100_model
) -> None:
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100_model, gpu_eq=2)
    quota_request = quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=a100_model, amount=1, reason="x"
    )

    response = client_for(admin_user).post(
        f"/api/v1/tenants/vision/quota-requests/{quota_request.pk}/reject",
        {"comment": "not this quarter"},
    )

    assert response.status_code == 200
    assert response.json()["state"] == "rejected"
    assert response.json()["decision_comment"] == "not this quarter"
    assert Quota.objects.get(tenant=tenant_a).gpu_eq == Fraction(2)


@pytest.mark.parametrize("persona", ["developer", "finance_user"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_non_admins_who_see_the_tenant_may_not_decide(
    request, client_for, lead, tenant_a, a100_model, persona, decision
) -> None:
    quota_request = quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=a100_model, amount=1, reason="x"
    )

    response = client_for(request.getfixturevalue(persona)).post(
        f"/api/v1/tenants/vision/quota-requests/{quota_request.pk}/{decision}"
    )

    assert response.status_code == 403
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequestState.PENDING


def test_a_quota_request_is_found_only_under_its_own_tenant(
    client_for, admin_user, tenant_a, tenant_b, a100_model
) -> None:
    nlp_lead = user_create(actor=None, username="nlp-lead")
    membership_set(actor=None, tenant=tenant_b, user=nlp_lead, role=MemberRole.LEAD)
    quota_request = quota_request_create(
        actor=nlp_lead, tenant=tenant_b, gpu_model=a100_model, amount=1, reason="x"
    )
    client = client_for(admin_user)

    wrong_tenant = client.post(f"/api/v1/tenants/vision/quota-requests/{quota_request.pk}/approve")
    no_such = client.post(f"/api/v1/tenants/nlp/quota-requests/{quota_request.pk + 1}/approve")

    assert wrong_tenant.status_code == 404
    assert no_such.status_code == 404
    quota_request.refresh_from_db()
    assert quota_request.state == QuotaRequestState.PENDING


@pytest.mark.parametrize("count", [3, 30])
def test_member_list_queries_do_not_grow_with_members(
    client_for, admin_user, tenant_a, django_assert_num_queries, count
) -> None:
    for number in range(count):
        user = user_create(actor=None, username=f"member-{number}")
        membership_set(actor=None, tenant=tenant_a, user=user, role=MemberRole.DEVELOPER)
    client = client_for(admin_user)

    # session, user, tenant, page (shorter than a page: counted from its rows)
    with django_assert_num_queries(4):
        response = client.get("/api/v1/tenants/vision/members/?page_size=50")

    assert len(response.json()["results"]) == count
