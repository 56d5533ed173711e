"""A request for an offering that no GPU pool of any cluster serves is refused with the reason,
and the preview says so first: an approval could never become active and would hold quota in
"approved" for ever."""

import pytest

from portal.allocations.models import RequestState
from portal.allocations.services import gpu_request_approve, gpu_request_submit
from portal.catalog.models import GpuPool
from portal.catalog.services import gpu_pool_create, gpu_pool_delete
from portal.cluster.services import cluster_create, cluster_update
from portal.core.errors import Conflict
from portal.core.models import AuditEvent
from tenants.selectors import remaining_gpu_eq
from tests.loaded import page_loaded

PREVIEW_API = "/api/v1/requests/preview"
WHOLE, MIG = "a100-80gb-whole", "a100-80gb-mig-3g-40gb"


@pytest.fixture
def whole_a100_pool(admin_user, catalog) -> GpuPool:
    """Cluster `lab` (dry-run) with one pool: whole A100s. MIG slices of A100 run nowhere."""
    cluster_create(actor=admin_user, name="lab")
    whole = catalog[WHOLE]
    return gpu_pool_create(
        actor=admin_user,
        cluster="lab",
        name="a100",
        gpu_model=whole.gpu_model,
        backend=whole.backend,
        node_count=1,
    )


def only_t4_pools(admin_user, catalog, whole_a100_pool: GpuPool) -> None:
    """The A100 pool goes; the cluster still describes its pools, none of them A100s."""
    gpu_pool_delete(actor=admin_user, pool=whole_a100_pool)
    gpu_pool_create(
        actor=admin_user,
        cluster="lab",
        name="t4",
        gpu_model=catalog["t4-whole"].gpu_model,
        backend=catalog["t4-whole"].backend,
    )


def test_a_request_no_pool_serves_is_refused_with_the_reason_and_holds_nothing(
    developer, a100_tenant, catalog, whole_a100_pool
) -> None:
    refused = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[MIG], count=1
    )
    served = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1
    )

    assert refused.state == RequestState.REJECTED
    assert "No GPU pool of any cluster serves" in refused.decision_comment
    assert catalog[MIG].name in refused.decision_comment
    assert served.state == RequestState.APPROVED
    assert remaining_gpu_eq(a100_tenant, catalog[WHOLE].gpu_model) == 9  # only the served one
    event = AuditEvent.objects.get(action="gpu_request.submit", target_id=str(refused.pk))
    assert event.changes["state"] == [None, "rejected"]
    assert event.comment == refused.decision_comment


def test_the_preview_says_a_request_would_be_refused_before_it_is_made(
    client_for, developer, a100_tenant, whole_a100_pool
) -> None:
    client = client_for(developer)
    body = {"tenant": "vision", "offering": MIG, "count": 1}

    answer = client.post(PREVIEW_API, body, content_type="application/json")
    fragment = client.get("/requests/preview/", body, HTTP_HX_REQUEST="true").text

    assert answer.status_code == 200
    assert answer.json()["path"] == "unserved"
    assert answer.json()["message"].startswith("Refused: No GPU pool of any cluster serves")
    assert 'class="path unserved"' in fragment
    assert "No GPU pool of any cluster serves" in fragment


def test_the_api_answers_a_refused_unserved_request_with_409_naming_the_offering(
    client_for, developer, a100_tenant, whole_a100_pool
) -> None:
    answer = client_for(developer).post(
        "/api/v1/requests/",
        {"tenant": "vision", "offering": MIG, "count": 1},
        content_type="application/json",
    )

    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "offering_unserved"
    assert "No GPU pool of any cluster serves" in error["fields"]["offering"][0]


def test_a_pending_request_whose_pool_went_away_cannot_be_approved(
    developer, lead, admin_user, a100_tenant, catalog, whole_a100_pool
) -> None:
    pending = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=2
    )
    assert pending.state == RequestState.PENDING
    only_t4_pools(admin_user, catalog, whole_a100_pool)

    with pytest.raises(Conflict, match="No GPU pool of any cluster serves"):
        gpu_request_approve(actor=lead, gpu_request=pending)

    pending.refresh_from_db()
    assert pending.state == RequestState.PENDING


def test_a_cluster_that_describes_no_pools_serves_every_offering(
    developer, admin_user, a100_tenant, catalog, whole_a100_pool
) -> None:
    cluster_create(actor=admin_user, name="spare")  # no pools: provisioning places everything

    gpu_request = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[MIG], count=1
    )

    assert gpu_request.state == RequestState.APPROVED


def test_an_allocation_approved_before_the_rule_is_shown_on_the_tenant_page(
    client_for, developer, admin_user, a100_tenant, catalog, whole_a100_pool
) -> None:
    approved = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1
    )
    assert approved.state == RequestState.APPROVED
    page = page_loaded(client_for(admin_user), "/tenants/vision/")
    assert 'data-testid="unserved-allocations"' not in page

    only_t4_pools(admin_user, catalog, whole_a100_pool)
    page = page_loaded(client_for(admin_user), "/tenants/vision/")

    assert 'data-testid="unserved-allocations"' in page
    assert f"request {approved.pk}" in page


def test_a_cluster_disabled_serves_nothing_from_the_next_request_on(
    developer, admin_user, a100_tenant, catalog, whole_a100_pool
) -> None:
    """Which offerings are served is kept with the process's catalog rows (`catalog_kept`): a
    cluster's change moves their version, as a pool's does."""
    spare = cluster_create(actor=admin_user, name="spare")  # no pools: serves every offering
    served = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=catalog[MIG], count=1)

    cluster_update(actor=admin_user, cluster=spare, enabled=False)
    refused = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[MIG], count=1
    )

    assert served.state == RequestState.APPROVED
    assert refused.state == RequestState.REJECTED
    assert "No GPU pool of any cluster serves" in refused.decision_comment
