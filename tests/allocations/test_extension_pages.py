"""The extend form asks for a reason when a lead must decide and shows the extension waiting;
the lead decides from Approvals, where extensions sit beside requests with the quota left."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.allocations.models import ExtensionState, GpuRequest, GpuRequestExtension
from portal.allocations.services import (
    gpu_request_extend,
    gpu_request_extension_reject,
    gpu_request_submit,
)
from tests.loaded import page_loaded


@pytest.fixture
def allocation(developer, a100_tenant, catalog) -> GpuRequest:
    return gpu_request_submit(
        actor=developer,
        tenant=a100_tenant,
        offering=catalog["a100-80gb-whole"],
        count=1,
        duration_hours=4,
    )


def test_within_policy_the_form_extends_at_once(client_for, developer, allocation) -> None:
    response = client_for(developer).post(
        f"/requests/{allocation.pk}/extend/", {"hours": 2}, follow=True
    )

    assert response.redirect_chain[-1][0] == "/requests/"
    assert f"Request {allocation.pk} is extended by 2 hours." in response.text
    allocation.refresh_from_db()
    assert allocation.duration_hours == 6


def test_beyond_policy_the_form_asks_for_a_reason_then_shows_it_waiting(
    client_for, developer, allocation
) -> None:
    client = client_for(developer)

    refused = client.post(f"/requests/{allocation.pk}/extend/", {"hours": 12})
    asked = client.post(
        f"/requests/{allocation.pk}/extend/", {"hours": 12, "reason": "a long run"}, follow=True
    )

    assert refused.status_code == 422
    assert "needs a lead" in refused.text
    assert "Reason for the lead" in refused.text
    assert 'value="12"' in refused.text  # what was typed stays
    assert "Ask a lead" in refused.text
    assert "is waiting for a lead" in asked.text
    assert f'data-testid="extension-waiting-{allocation.pk}"' in asked.text
    assert "Extension by 12 h waiting for a lead" in asked.text
    assert GpuRequestExtension.objects.get().reason == "a long run"


def test_bad_hours_show_beside_the_field(client_for, developer, allocation) -> None:
    zero = client_for(developer).post(f"/requests/{allocation.pk}/extend/", {"hours": 0})
    too_long = client_for(developer).post(f"/requests/{allocation.pk}/extend/", {"hours": 500})

    assert zero.status_code == 400
    assert "Extend by at least 1 hour." in zero.text
    assert too_long.status_code == 400
    assert "allows 168" in too_long.text


def test_the_extend_page_is_404_for_outsiders(client_for, outsider, allocation) -> None:
    assert client_for(outsider).get(f"/requests/{allocation.pk}/extend/").status_code == 404
    assert (
        client_for(outsider).post(f"/requests/{allocation.pk}/extend/", {"hours": 1}).status_code
        == 404
    )


def test_the_lead_sees_the_extension_with_the_quota_left_and_approves_it(
    client_for, developer, lead, allocation
) -> None:
    extension = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=12, reason="a long run"
    ).extension_pending
    assert extension is not None

    queue = page_loaded(client_for(lead), "/approvals/")
    approved = client_for(lead).post(
        f"/extensions/{extension.pk}/approve/",
        {"comment": "fine", "next": "/approvals/"},
        follow=True,
    )

    assert f'data-testid="extension-{extension.pk}"' in queue
    assert "a long run" in queue
    assert "+12 h (16 of at most 168 h)" in queue
    assert "9 of 10 GPU-eq (NVIDIA A100-SXM4-80GB)" in queue
    assert "Extensions (1 waiting)" in queue
    assert f"Extension {extension.pk} is approved" in approved.text
    extension.refresh_from_db()
    assert extension.state == ExtensionState.APPROVED
    assert extension.decision_comment == "fine"


def test_a_conflict_on_approval_is_told_on_the_approvals_page(
    client_for, developer, lead, allocation
) -> None:
    extension = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=12, reason="why"
    ).extension_pending
    assert extension is not None
    client_for(lead).post(f"/extensions/{extension.pk}/reject/")

    again = client_for(lead).post(f"/extensions/{extension.pk}/approve/", follow=True)

    assert again.redirect_chain[-1][0] == "/approvals/"
    assert "is rejected; it cannot be approved" in again.text


def test_the_developer_cannot_decide_and_outsiders_get_404(
    client_for, developer, outsider, allocation
) -> None:
    extension = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=12, reason="why"
    ).extension_pending
    assert extension is not None

    assert client_for(developer).post(f"/extensions/{extension.pk}/approve/").status_code == 403
    assert client_for(outsider).post(f"/extensions/{extension.pk}/cancel/").status_code == 404
    cancelled = client_for(developer).post(f"/extensions/{extension.pk}/cancel/", follow=True)
    assert f"Extension {extension.pk} is cancelled." in cancelled.text


def test_approvals_page_queries_do_not_grow_with_extensions(
    client_for, django_assert_max_num_queries, developer, lead, a100_tenant, catalog
) -> None:
    client = client_for(lead)

    def add(number: int) -> None:
        for _ in range(number):
            allocation = gpu_request_submit(
                actor=developer,
                tenant=a100_tenant,
                offering=catalog["a100-80gb-mig-1g-10gb"],
                count=1,
                duration_hours=1,
            )
            gpu_request_extend(actor=developer, gpu_request=allocation, hours=12, reason="more")
            gpu_request_submit(
                actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
            )

    add(2)
    client.get("/approvals/")  # signed in before counting
    # The page: session, user, its requests (count, rows), their catalog rows, the quota
    # left, the navigation's pending count and the lead's tenants. Its extensions section:
    # the same less the requests.
    with django_assert_max_num_queries(9):
        client.get("/approvals/")
    with django_assert_max_num_queries(9):
        few = client.get("/approvals/extensions/", HTTP_HX_REQUEST="true")
    add(20)
    with django_assert_max_num_queries(9):
        client.get("/approvals/")
    with django_assert_max_num_queries(9):
        many = client.get("/approvals/extensions/", HTTP_HX_REQUEST="true")

    assert few.text.count('<tr data-testid="extension-') == 2
    assert many.text.count('<tr data-testid="extension-') == 22


def test_the_request_page_shows_each_extension_and_its_decision(
    client_for, developer, lead, outsider, allocation, django_assert_max_num_queries
) -> None:
    first = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=12, reason="a long run"
    ).extension_pending
    assert first is not None
    gpu_request_extension_reject(actor=lead, extension=first, comment="not this week")
    second = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=24, reason="the final run"
    ).extension_pending
    assert second is not None

    client = client_for(developer)
    client.get("/requests/")  # signed in before counting
    # session, user, request, rates, offerings, clusters, pools, lead check, extensions, …
    with django_assert_max_num_queries(12):
        page = client.get(f"/requests/{allocation.pk}/")

    rejected = page.text.split(f'data-testid="request-extension-{first.pk}"')[1].split("</tr>")[0]
    waiting = page.text.split(f'data-testid="request-extension-{second.pk}"')[1].split("</tr>")[0]
    assert "+12 h" in rejected
    assert "rejected" in rejected
    assert "lead: not this week" in rejected
    assert "+24 h" in waiting
    assert "pending" in waiting
    assert "the final run" in waiting
    # Newest first.
    assert page.text.index(f"request-extension-{second.pk}") < page.text.index(
        f"request-extension-{first.pk}"
    )
    assert client_for(outsider).get(f"/requests/{allocation.pk}/").status_code == 404


def test_the_extensions_load_after_the_approvals_page_with_its_query(
    client_for, developer, lead, allocation, a100_tenant
) -> None:
    extension = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=12, reason="a long run"
    ).extension_pending
    assert extension is not None
    client = client_for(lead)

    page = client.get("/approvals/", {"tenant": a100_tenant.slug})
    section = client.get(
        "/approvals/extensions/", {"tenant": a100_tenant.slug}, HTTP_HX_REQUEST="true"
    )
    elsewhere = client.get("/approvals/extensions/", {"tenant": "nobody"}, HTTP_HX_REQUEST="true")
    without_js = client.get("/approvals/extensions/", {"tenant": a100_tenant.slug})

    # The page holds a placeholder that fetches the section for the same filter.
    assert f'data-testid="extension-{extension.pk}"' not in page.text
    assert f'hx-get="/approvals/extensions/?tenant={a100_tenant.slug}"' in page.text
    assert 'data-testid="approvals-show-extensions"' in page.text
    # htmx gets the section alone; it replaces the placeholder.
    assert section.status_code == 200
    assert section.text.lstrip().startswith('<section id="extensions"')
    assert "<html" not in section.text
    assert f'data-testid="extension-{extension.pk}"' in section.text
    assert "HX-Request" in section["Vary"]
    assert f'data-testid="extension-{extension.pk}"' not in elsewhere.text
    # Without JavaScript the placeholder's link shows the whole page with the section in it.
    assert without_js.status_code == 200
    assert "<html" in without_js.text
    assert 'data-testid="approvals-show-extensions"' not in without_js.text
    assert f'data-testid="extension-{extension.pk}"' in without_js.text
    assert "HX-Request" in without_js["Vary"]


def test_the_extensions_section_is_404_but_for_those_who_decide(
    client_for, developer, outsider, lead, admin_user, allocation
) -> None:
    for user in (developer, outsider):
        client = client_for(user)
        assert client.get("/approvals/extensions/", HTTP_HX_REQUEST="true").status_code == 404
        assert client.get("/approvals/extensions/").status_code == 404
    for user in (lead, admin_user):
        assert (
            client_for(user).get("/approvals/extensions/", HTTP_HX_REQUEST="true").status_code
            == 200
        )
    assert client_for(lead).post("/approvals/extensions/").status_code == 405


def test_my_requests_reads_the_waiting_extension_in_the_rows_own_statement(
    client_for, developer, allocation
) -> None:
    # The table polls until nothing waits: read apart, a decision committed between the rows'
    # statement and the extensions' would show no extension waiting and the end before it,
    # and polling would stop there.
    extension = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=12, reason="a long run"
    ).extension_pending
    assert extension is not None
    client = client_for(developer)
    client.get("/requests/")  # signed in before counting

    with CaptureQueriesContext(connection) as captured:
        page = client.get("/requests/")

    assert f'data-testid="extension-waiting-{allocation.pk}"' in page.text
    assert f"/extensions/{extension.pk}/cancel/" in page.text
    reads = [query["sql"] for query in captured.captured_queries]
    rows = [sql for sql in reads if 'FROM "allocations_gpurequest"' in sql and "LIMIT 25" in sql]
    assert len(rows) == 1
    assert '"allocations_gpurequestextension"' in rows[0]
    apart = [sql for sql in reads if sql.startswith('SELECT "allocations_gpurequestextension"')]
    assert apart == []
