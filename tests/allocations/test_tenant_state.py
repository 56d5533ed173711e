"""Suspending or archiving a tenant ends what it holds: its allocations are revoked and its
pending requests rejected, each with its audit event, in the state change's transaction.
Reactivating restores none of them."""

import pytest

from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_approve, gpu_request_submit
from portal.core.errors import InvalidTransition
from portal.core.models import AuditEvent
from tenants.selectors import remaining_gpu_eq
from tenants.services import tenant_change_state

WHOLE = "a100-80gb-whole"


@pytest.fixture
def held_and_pending(developer, a100_tenant, catalog) -> tuple[GpuRequest, GpuRequest]:
    held = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1)
    pending = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=2
    )
    assert (held.state, pending.state) == (RequestState.APPROVED, RequestState.PENDING)
    return held, pending


@pytest.mark.parametrize(("action", "state"), [("suspend", "suspended"), ("archive", "archived")])
def test_suspending_or_archiving_revokes_allocations_and_rejects_pending_requests(
    admin_user, a100_tenant, catalog, held_and_pending, action, state
) -> None:
    held, pending = held_and_pending

    tenant_change_state(actor=admin_user, tenant=a100_tenant, action=action)

    held.refresh_from_db()
    pending.refresh_from_db()
    assert held.state == RequestState.REVOKED
    assert pending.state == RequestState.REJECTED
    assert held.decision_comment == f"Tenant vision was {state}."
    assert pending.decision_comment == f"Tenant vision was {state}."
    assert remaining_gpu_eq(a100_tenant, catalog[WHOLE].gpu_model) == 10
    for gpu_request, verb in ((held, "revoke"), (pending, "reject")):
        event = AuditEvent.objects.get(action=f"gpu_request.{verb}", target_id=str(gpu_request.pk))
        assert event.actor == admin_user
        assert event.comment == f"Tenant vision was {state}."


def test_reactivating_restores_nothing_and_requests_are_decided_again(
    developer, admin_user, a100_tenant, catalog, held_and_pending
) -> None:
    tenant_change_state(actor=admin_user, tenant=a100_tenant, action="suspend")
    tenant = tenant_change_state(actor=admin_user, tenant=a100_tenant, action="reactivate")

    held, pending = (GpuRequest.objects.get(pk=r.pk) for r in held_and_pending)
    assert (held.state, pending.state) == (RequestState.REVOKED, RequestState.REJECTED)
    again = gpu_request_submit(actor=developer, tenant=tenant, offering=catalog[WHOLE], count=1)
    assert again.state == RequestState.APPROVED


def test_a_pending_request_of_a_suspended_tenant_cannot_be_approved(
    lead, admin_user, a100_tenant, held_and_pending
) -> None:
    _, pending = held_and_pending
    # Left pending as if from before this rule: the approval itself refuses it.
    tenant_change_state(actor=admin_user, tenant=a100_tenant, action="suspend")
    GpuRequest.objects.filter(pk=pending.pk).update(state=RequestState.PENDING)

    with pytest.raises(InvalidTransition, match="suspended"):
        gpu_request_approve(actor=lead, gpu_request=pending)


def test_the_tenant_page_says_what_suspension_did(client_for, admin_user, a100_tenant) -> None:
    tenant_change_state(actor=admin_user, tenant=a100_tenant, action="suspend")

    page = client_for(admin_user).get("/tenants/vision/").text

    assert "its allocations were revoked and its pending requests rejected" in page
    assert "Reactivating it restores none of them" in page
