"""Every page and API endpoint runs the same number of queries with more data (issue 19).

The URL walk's routes (tests/test_url_walk.py) are read with GET as each persona that may read
them, their queries counted, with some of every kind of row the lists show added through the
services (requests, allocations and their extensions, members, tenants with quotas, audit
events with them); then as many again are added, and each route must run exactly as many
queries as before.
"""

import difflib
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_extend, gpu_request_submit
from portal.catalog.models import Offering
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, quota_set, tenant_create
from tests.test_url_walk import PERSONAS, ROUTES, walk_kwargs  # noqa: F401  (the fixture)

MORE = 4  # of each kind of row


def _counts(client: Client, urls: dict[str, str]) -> dict[str, list[str]]:
    """Each route's queries (their SQL)."""
    counts = {}
    for name, url in urls.items():
        client.get(url)  # first-call caches (content types, the catalog) are not the point
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200, (name, url, response.status_code)
        counts[name] = [query["sql"] for query in captured.captured_queries]
    return counts


def _more_of_everything(
    tenant: Tenant, developer: Any, lead: Any, admin: Any, round_number: int
) -> None:
    offering = Offering.objects.get(slug="a100-mig-1g")
    for index in range(MORE):
        number = f"{round_number}-{index}"
        member = user_create(actor=admin, username=f"more-{number}")
        membership_set(actor=lead, tenant=tenant, user=member, role=MemberRole.DEVELOPER)
        gpu_request_submit(actor=member, tenant=tenant, offering=offering, count=1)
        gpu_request_submit(actor=developer, tenant=tenant, offering=offering, count=8)
        other = tenant_create(actor=admin, slug=f"more-{number}", name=f"More {number}")
        quota_set(actor=admin, tenant=other, gpu_model=offering.gpu_model, gpu_eq=4)
        membership_set(actor=admin, tenant=other, user=member, role=MemberRole.LEAD)
    for allocation in GpuRequest.objects.filter(tenant=tenant, state="active", count=1)[:MORE]:
        if not allocation.extensions.filter(state="pending").exists():
            gpu_request_extend(
                actor=allocation.requester, gpu_request=allocation, hours=20, reason="more"
            )


@pytest.mark.parametrize("persona", [persona for persona in PERSONAS if persona != "anonymous"])
def test_each_page_and_endpoint_runs_as_many_queries_with_more_data(
    request: pytest.FixtureRequest,
    persona: str,
    walk_kwargs: dict[str, dict[str, Any]],  # noqa: F811
    tenant_a: Tenant,
    developer: Any,
    lead: Any,
    admin_user: Any,
) -> None:
    column = PERSONAS.index(persona)
    urls = {
        name: reverse(name, kwargs=walk_kwargs[kwargs_name])
        for name, (method, kwargs_name, statuses) in ROUTES.items()
        if method == "get" and statuses[column] == 200
    }
    client = Client()
    client.force_login(request.getfixturevalue(persona))
    # Some of everything first, so that no list is empty (an empty list may skip a query).
    _more_of_everything(tenant_a, developer, lead, admin_user, 1)
    before = _counts(client, urls)

    _more_of_everything(tenant_a, developer, lead, admin_user, 2)

    after = _counts(client, urls)
    assert len(urls) >= 30
    grew = {
        name: (len(before[name]), len(after[name]))
        for name in urls
        if len(after[name]) != len(before[name])
    }
    shown = "\n\n".join(
        f"{name}:\n  "
        + "\n  ".join(
            line[:200] for line in difflib.unified_diff(before[name], after[name], lineterm="", n=0)
        )
        for name in grew
    )
    assert grew == {}, f"queries (before, after) of routes that grew with the data: {grew}\n{shown}"
