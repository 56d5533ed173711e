import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit


def form(**overrides):
    base = {"tenant": "vision", "offering": "a100-80gb-mig-3g-40gb", "count": 1}
    return {**base, "duration_hours": "", "purpose": "notebook", "justification": "", **overrides}


def test_developer_requests_within_policy_and_sees_it_approved(
    client_for, developer, a100_tenant
) -> None:
    response = client_for(developer).post("/requests/new/", form(), follow=True)

    assert response.redirect_chain[-1][0] == "/requests/"
    assert "is approved" in response.text
    assert GpuRequest.objects.get().state == RequestState.APPROVED


def test_a_request_beyond_quota_shows_the_numbers_on_the_count(
    client_for, developer, a100_tenant
) -> None:
    response = client_for(developer).post(
        "/requests/new/", form(offering="a100-80gb-whole", count=11)
    )

    assert response.status_code == 409
    assert (
        "Count: Exceeds the remaining quota: requested 11 GPU-eq, 10 of 10 remaining"
        in response.text
    )


@pytest.mark.parametrize(
    ("overrides", "shown"),
    [
        ({"count": 0}, "Count: Ask for at least 1."),
        ({"duration_hours": 999}, "Duration (hours): At most 168 hours in vision."),
        ({"offering": "h100-80gb-whole"}, "GPU and size: Tenant vision has no quota"),
        ({"tenant": "nlp"}, "Tenant: Select a valid choice."),
    ],
)
def test_bad_input_is_shown_on_the_field(
    client_for, developer, a100_tenant, tenant_b, overrides, shown
) -> None:
    response = client_for(developer).post("/requests/new/", form(**overrides))

    assert response.status_code == 400
    assert shown in response.text
    assert not GpuRequest.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({}, "Approved at once"),
        ({"offering": "a100-80gb-whole", "count": 2}, "Needs a lead"),
        ({"offering": "a100-80gb-whole", "count": 11}, "Exceeds the remaining quota"),
        ({"offering": "h100-80gb-whole"}, "has no quota for this GPU model"),
    ],
)
def test_the_preview_tells_the_path_before_asking(
    client_for, developer, a100_tenant, overrides, path
) -> None:
    response = client_for(developer).get(
        "/requests/preview/", form(**overrides), HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 200
    assert path in response.text
    assert not GpuRequest.objects.exists()


def test_the_preview_shows_quota_left_after_the_request(client_for, developer, a100_tenant) -> None:
    response = client_for(developer).get("/requests/preview/", form(count=1))

    assert "9.57 of 10 GPU-eq" in response.text  # 10 - 3/7


def test_my_requests_polls_while_pending_and_stops_after(
    client_for, developer, lead, a100_tenant, catalog
) -> None:
    pending = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
    )
    client = client_for(developer)

    polling = client.get("/requests/", HTTP_HX_REQUEST="true")
    client_for(lead).post(f"/requests/{pending.pk}/approve/", {"comment": "ok"})
    settled = client.get("/requests/", HTTP_HX_REQUEST="true")

    assert polling.status_code == 200
    assert 'hx-trigger="every 2s"' in polling.text
    assert settled.status_code == 286
    assert f'data-testid="request-state-{pending.pk}">approved' in settled.text


def test_lead_approves_several_at_once(client_for, developer, lead, a100_tenant, catalog) -> None:
    whole = catalog["a100-80gb-whole"]
    ids = [
        gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=4).pk
        for _ in range(3)
    ]

    response = client_for(lead).post("/approvals/approve/", {"ids": ids}, follow=True)

    states = list(GpuRequest.objects.order_by("id").values_list("state", flat=True))
    assert states == ["approved", "approved", "pending"]  # the third no longer fits: 8 of 10 held
    assert "Approved 2" in response.text
    assert "no longer fits the quota" in response.text


def test_lead_queue_lists_their_tenants_pending_requests_oldest_first(
    client_for, developer, lead, outsider, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]
    first = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=2)
    second = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=3)

    text = client_for(lead).get("/approvals/").text

    assert text.index(f'data-testid="pending-{first.pk}"') < text.index(
        f'data-testid="pending-{second.pk}"'
    )
    assert client_for(outsider).get("/approvals/").status_code == 404


def test_outsider_cannot_act_on_another_tenants_request(
    client_for, developer, outsider, a100_tenant, catalog
) -> None:
    allocation = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )

    response = client_for(outsider).post(f"/requests/{allocation.pk}/release/")

    assert response.status_code == 404
    allocation.refresh_from_db()
    assert allocation.state == RequestState.APPROVED


def test_leads_get_a_one_click_way_to_ask_for_more_quota(
    client_for, developer, lead, a100_tenant
) -> None:
    too_much = form(offering="a100-80gb-whole", count=11)

    for_lead = client_for(lead).get("/requests/preview/", too_much)
    for_developer = client_for(developer).get("/requests/preview/", too_much)

    assert 'href="/tenants/vision/#quota-requests"' in for_lead.text
    assert "ask-quota" not in for_developer.text


def test_request_lists_run_the_same_queries_for_3_and_30_requests(
    client_for, developer, lead, a100_tenant, catalog
) -> None:
    developer_client, lead_client = client_for(developer), client_for(lead)

    def queries() -> list[int]:
        counts = []
        for client, url in (
            (developer_client, "/requests/"),
            (lead_client, "/approvals/"),
            (developer_client, "/api/v1/requests/"),
        ):
            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            counts.append(len(captured))
        return counts

    def add(number: int) -> None:
        for _ in range(number):
            gpu_request_submit(
                actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
            )

    add(3)
    queries()  # the process reads the catalog once (portal/catalog/cache.py)
    with_three = queries()
    add(27)
    with_thirty = queries()
    add(30)
    with_sixty = queries()

    # A list that one page holds is counted from its rows; a full page runs its count.
    for more in (with_thirty, with_sixty):
        assert all(three <= n <= three + 1 for three, n in zip(with_three, more, strict=True))
    # My requests, Approvals (its requests and the quota left beside them; its extensions load
    # after), the API; the listed requests' offerings and GPU models from the process's
    # catalog rows.
    mine, approvals, api = with_thirty
    assert mine <= 10
    assert approvals <= 9
    assert api <= 10
