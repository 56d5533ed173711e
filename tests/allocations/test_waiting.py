"""An allocation that is not final says why it waits, on its row (My requests, All requests)
and its page: a lead to decide, its provisioning run queued or failed (with the error and a
link to the run), no GPU pool serving it, no cluster yet. The reasons come from the cluster
app (allocations sit below it) for a whole page in a bounded number of queries."""

import re

import pytest

from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.services import gpu_pool_create, gpu_pool_delete
from portal.cluster.models import ProvisioningRun, RunState
from portal.cluster.services import cluster_create
from tenants.services import quota_set

WHOLE, MIG = "a100-80gb-whole", "a100-80gb-mig-3g-40gb"


def waiting(page: str, pk: int) -> tuple[str, str]:
    """The waiting reason's code and text shown for request `pk`."""
    match = re.search(
        rf'data-testid="waiting-{pk}" data-waiting="([^"]+)">(.*?)</small>', page, re.S
    )
    assert match, f"no waiting reason for request {pk}"
    return match.group(1), " ".join(re.sub(r"<[^>]+>", " ", match.group(2)).split())


@pytest.fixture
def lab(admin_user, catalog):
    """Cluster `lab` (dry-run) whose only pool has whole A100s."""
    cluster = cluster_create(actor=admin_user, name="lab")
    whole = catalog[WHOLE]
    pool = gpu_pool_create(
        actor=admin_user, cluster="lab", name="a100", gpu_model=whole.gpu_model,
        backend=whole.backend, node_count=1,
    )  # fmt: skip
    return cluster, pool


def approved(developer, tenant, catalog, slug=WHOLE) -> GpuRequest:
    allocation = gpu_request_submit(actor=developer, tenant=tenant, offering=catalog[slug], count=1)
    assert allocation.state == RequestState.APPROVED
    return allocation


def test_a_queued_run_is_shown_with_a_link_on_the_row_and_the_page(
    client_for, developer, admin_user, a100_tenant, catalog, lab
) -> None:
    allocation = approved(developer, a100_tenant, catalog)
    run = ProvisioningRun.objects.get(gpu_requests=allocation)

    mine = client_for(developer).get("/requests/").text
    everyone = client_for(admin_user).get("/manage/requests/").text
    detail = client_for(developer).get(f"/requests/{allocation.pk}/").text

    for page in (mine, everyone, detail):
        code, text = waiting(page, allocation.pk)
        assert code == "queued"
        assert f"Provisioning run {run.pk} is queued in lab" in text
        assert f'href="/provisioning-runs/{run.pk}/"' in page


def test_a_failed_run_is_shown_with_its_error_and_a_link(
    client_for, developer, a100_tenant, catalog, lab
) -> None:
    allocation = approved(developer, a100_tenant, catalog)
    run = ProvisioningRun.objects.get(gpu_requests=allocation)
    ProvisioningRun.objects.filter(pk=run.pk).update(
        state=RunState.FAILED, error="ResourceQuota rejected: forbidden"
    )

    page = client_for(developer).get(f"/requests/{allocation.pk}/").text

    code, text = waiting(page, allocation.pk)
    assert code == "failed"
    assert f"Provisioning run {run.pk} failed in lab: ResourceQuota rejected: forbidden" in text
    assert f'data-testid="waiting-link-{allocation.pk}"' in page
    assert f'href="/provisioning-runs/{run.pk}/"' in page


def test_an_allocation_no_pool_serves_says_so(
    client_for, developer, admin_user, a100_tenant, catalog, lab
) -> None:
    allocation = approved(developer, a100_tenant, catalog)
    _, pool = lab
    gpu_pool_delete(actor=admin_user, pool=pool)
    gpu_pool_create(
        actor=admin_user, cluster="lab", name="t4", gpu_model=catalog["t4-whole"].gpu_model,
        backend=catalog["t4-whole"].backend,
    )  # fmt: skip

    code, text = waiting(client_for(developer).get("/requests/").text, allocation.pk)

    assert code == "unserved"
    assert f"No GPU pool serves {catalog[WHOLE].name}" in text


def test_without_any_cluster_it_waits_for_one(client_for, developer, a100_tenant, catalog) -> None:
    allocation = approved(developer, a100_tenant, catalog)

    code, _ = waiting(client_for(developer).get("/requests/").text, allocation.pk)

    assert code == "no-cluster"


def test_a_pending_request_waits_for_a_lead_and_final_ones_say_nothing(
    client_for, developer, a100_tenant, catalog, lab
) -> None:
    pending = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=2
    )
    refused = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[MIG], count=1
    )
    assert refused.state == RequestState.REJECTED

    page = client_for(developer).get("/requests/").text

    assert waiting(page, pending.pk)[0] == "lead"
    assert f'data-testid="waiting-{refused.pk}"' not in page


def test_an_active_allocation_waits_for_nothing(
    client_for, developer, a100_tenant, catalog, lab
) -> None:
    allocation = approved(developer, a100_tenant, catalog)
    GpuRequest.objects.filter(pk=allocation.pk).update(state=RequestState.ACTIVE)

    page = client_for(developer).get(f"/requests/{allocation.pk}/").text

    assert f'data-testid="waiting-{allocation.pk}"' not in page


def test_an_outsider_cannot_see_the_page(client_for, developer, outsider, a100_tenant, catalog):
    allocation = approved(developer, a100_tenant, catalog)

    assert client_for(outsider).get(f"/requests/{allocation.pk}/").status_code == 404


def test_waiting_reasons_for_a_page_take_bounded_queries(
    client_for, developer, admin_user, a100_tenant, catalog, lab, django_assert_max_num_queries
) -> None:
    quota_set(actor=admin_user, tenant=a100_tenant, gpu_model=catalog[WHOLE].gpu_model, gpu_eq=50)
    allocations = [approved(developer, a100_tenant, catalog) for _ in range(3)]
    client = client_for(admin_user)
    with django_assert_max_num_queries(40) as few:
        client.get("/manage/requests/")
    allocations += [approved(developer, a100_tenant, catalog) for _ in range(22)]
    ProvisioningRun.objects.filter(gpu_requests__in=allocations).update(
        state=RunState.FAILED, error="boom"
    )

    # One more: the count, which a page that ends its list takes from its own rows.
    with django_assert_max_num_queries(len(few.captured_queries) + 1):
        page = client.get("/manage/requests/").text

    assert all(waiting(page, row.pk)[0] == "failed" for row in allocations)
