"""Lists whose visibility is a union of branches (a lead's requests: their own OR their led
tenants'), read branch by branch (portal/core/visibility.any_of, pagination.first_rows): the
same rows in the same order, and the same count, as the plain OR filter gives, by page number
and by cursor, with the list's filters, where branches overlap, for a lead of more tenants than
are read one by one, and past the counted bound."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest, RequestState
from portal.catalog.models import Offering
from portal.core.audit import audit_record
from portal.core.models import AuditEvent
from portal.core.pagination import COUNT_LIMIT
from tenants.access import MAX_TENANT_BRANCHES
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, tenant_create

API = "/api/v1/requests/"
START = datetime(2026, 1, 1, tzinfo=UTC)


def _tenant(slug: str) -> Tenant:
    return tenant_create(actor=None, slug=slug, name=slug.title())


def _requests(
    tenant: Tenant, requester: User, offering: Offering, number: int, *, first: int = 0
) -> None:
    """`number` requests, two a second (ties in `created_at` broken by id), in turning states."""
    states = list(RequestState)
    rows = [
        GpuRequest(
            tenant=tenant,
            requester=requester,
            offering=offering,
            gpu_model=offering.gpu_model,
            count=1,
            state=states[(first + index) % len(states)],
            purpose=f"{tenant.slug} {index}",
        )
        for index in range(number)
    ]
    for row in rows:
        row.gpu_eq = offering.gpu_eq
    made = GpuRequest.objects.bulk_create(rows, batch_size=2000)
    # created_at is set on insert (auto_now_add); spread it with ties, across the tenants.
    for index, row in enumerate(made):
        GpuRequest.objects.filter(pk=row.pk).update(
            created_at=START + timedelta(seconds=(first + index) // 2)
        )


def _expected(lead: User, led: list[Tenant], **filters: Any) -> list[int]:
    """The ids the lead may see, newest first, computed without the list's code."""
    rows = GpuRequest.objects.filter(**filters).order_by("-created_at", "-id")
    return [
        row.pk
        for row in rows.only("id", "tenant_id", "requester_id")
        if row.requester_id == lead.pk or row.tenant_id in {tenant.pk for tenant in led}
    ]


def _by_pages(client, query: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The ids of every page by number, and their counts."""
    ids, counts, page = [], [], 1
    while True:
        response = client.get(API, {**query, "page": page})
        assert response.status_code == 200, response.content
        body = response.json()
        ids += [row["id"] for row in body["results"]]
        counts.append(body["count"])
        if body["next"] is None:
            return ids, counts
        page += 1


def _by_cursor(client, query: dict[str, Any]) -> list[int]:
    ids = []
    body = client.get(API, query).json()
    while True:
        ids += [row["id"] for row in body["results"]]
        if body["next"] is None:
            return ids
        body = client.get(body["next"]).json()


@pytest.fixture
def people(db, catalog) -> dict[str, Any]:
    """A lead of tenants a and b, a developer in c; requests of others in a, b and an unseen d,
    and of the lead in a (also a led tenant's: the branches overlap) and in c."""
    offering = catalog["a100-80gb-whole"]
    tenants = {slug: _tenant(slug) for slug in ("ta", "tb", "tc", "td")}
    lead = user_create(actor=None, username="brlead")
    other = user_create(actor=None, username="brother")
    for slug, role in (
        ("ta", MemberRole.LEAD),
        ("tb", MemberRole.LEAD),
        ("tc", MemberRole.DEVELOPER),
    ):
        membership_set(actor=None, tenant=tenants[slug], user=lead, role=role)
    _requests(tenants["ta"], other, offering, 23)
    _requests(tenants["tb"], other, offering, 17, first=5)
    _requests(tenants["td"], other, offering, 19, first=3)
    _requests(tenants["ta"], lead, offering, 6, first=11)
    _requests(tenants["tc"], lead, offering, 9, first=2)
    return {"lead": lead, "led": [tenants["ta"], tenants["tb"]], "tenants": tenants}


@pytest.mark.parametrize("query", [{"page_size": 7}, {"page_size": 2, "state": "pending"}])
def test_a_leads_list_read_by_branches_is_the_or_filters_list(
    client_for, unthrottled, people, query: dict[str, Any]
) -> None:
    client = client_for(people["lead"])
    filters = {"state": query["state"]} if "state" in query else {}
    expected = _expected(people["lead"], people["led"], **filters)

    by_number, counts = _by_pages(client, query)
    by_cursor = _by_cursor(client, query)

    assert len(expected) > 2 * query["page_size"]  # several pages, so the merge is exercised
    assert by_number == expected
    assert by_cursor == expected
    assert set(counts) == {len(expected)}


def test_the_page_reads_each_branch_from_its_own_index_in_a_fixed_number_of_queries(
    client_for, people
) -> None:
    """The page's SQL names the branches (no OR walk), and the list stays at its queries."""
    client = client_for(people["lead"])

    with CaptureQueriesContext(connection) as queries:
        response = client.get(API, {"page_size": 5})

    assert response.status_code == 200
    page = [q["sql"] for q in queries.captured_queries if "ANY(ARRAY(" in q["sql"]]
    counted = [
        q["sql"] for q in queries.captured_queries if " UNION " in q["sql"] and "COUNT" in q["sql"]
    ]
    assert len(page) == 1
    # own, ta, tb: each branch's first rows, ordered together and cut to the page
    assert page[0].count(") UNION (") == 2
    assert "AS branched" in page[0]
    assert len(counted) == 1
    assert len(queries.captured_queries) <= 7  # session, user, roles, catalog (2), page, count


def test_a_lead_of_more_tenants_than_branches_reads_them_as_one(
    client_for, unthrottled, catalog
) -> None:
    offering = catalog["a100-80gb-whole"]
    lead = user_create(actor=None, username="manylead")
    other = user_create(actor=None, username="manyother")
    led = []
    for number in range(MAX_TENANT_BRANCHES + 1):
        tenant = _tenant(f"many{number}")
        membership_set(actor=None, tenant=tenant, user=lead, role=MemberRole.LEAD)
        _requests(tenant, other, offering, 3, first=number * 3)
        led.append(tenant)
    unseen = _tenant("manyunseen")
    _requests(unseen, lead, offering, 4, first=7)  # the lead's own, in a tenant they left
    _requests(unseen, other, offering, 4, first=9)

    ids, counts = _by_pages(client_for(lead), {"page_size": 4})

    assert ids == _expected(lead, led)
    assert set(counts) == {3 * (MAX_TENANT_BRANCHES + 1) + 4}


def test_a_long_list_read_by_branches_is_counted_up_to_the_bound(
    client_for, people, catalog
) -> None:
    """Each branch is counted up to the bound: past it the count says so, and the pages go on by
    cursor from the last counted page."""
    offering = catalog["a100-80gb-whole"]
    other = User.objects.get(username="brother")
    half = COUNT_LIMIT // 2 + 1
    _requests(people["tenants"]["ta"], other, offering, half, first=100)
    _requests(people["tenants"]["tb"], other, offering, half, first=100 + half)
    client = client_for(people["lead"])

    body = client.get(API, {"page_size": 500}).json()

    assert (body["count"], body["count_exact"]) == (COUNT_LIMIT, False)
    expected = _expected(people["lead"], people["led"])
    assert [row["id"] for row in body["results"]] == expected[:500]
    last = client.get(API, {"page_size": 500, "page": COUNT_LIMIT // 500}).json()
    assert [row["id"] for row in last["results"]] == expected[COUNT_LIMIT - 500 : COUNT_LIMIT]
    after = client.get(last["next"]).json()
    assert [row["id"] for row in after["results"]] == expected[COUNT_LIMIT : COUNT_LIMIT + 500]


def test_a_leads_audit_events_read_by_branches_are_the_or_filters_events(
    client_for, unthrottled, people
) -> None:
    """The audit log's scope (one's own actions OR the led tenants' events) the same way."""
    lead, tenants = people["lead"], people["tenants"]
    other = User.objects.get(username="brother")
    with transaction.atomic():
        for number in range(12):
            for actor, slug in ((other, "ta"), (other, "tb"), (other, "td"), (lead, "td")):
                audit_record(
                    actor=actor, action="test.branch", target=tenants[slug],
                    tenant=tenants[slug], comment=str(number),
                )  # fmt: skip
    led = {tenant.pk for tenant in people["led"]}
    expected = [
        event.pk
        for event in AuditEvent.objects.order_by("-at", "-id")
        if event.actor_id == lead.pk or event.tenant_id in led
    ]
    client = client_for(lead)

    ids, body = [], client.get("/api/v1/audit-events/", {"page_size": 9}).json()
    count = body["count"]
    while True:
        ids += [row["id"] for row in body["results"]]
        if body["next"] is None:
            break
        body = client.get(body["next"]).json()

    assert len(expected) > 3 * 9  # several pages
    assert ids == expected
    assert count == len(expected)
