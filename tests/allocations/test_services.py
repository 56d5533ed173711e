from datetime import timedelta
from fractions import Fraction

import pytest
from django.utils import timezone

from portal.allocations.models import RequestState
from portal.allocations.services import (
    allocations_expire,
    gpu_request_approve,
    gpu_request_cancel,
    gpu_request_extend,
    gpu_request_reject,
    gpu_request_release,
    gpu_request_revoke,
    gpu_request_submit,
)
from portal.core.errors import (
    InvalidTransition,
    PermissionDenied,
    PolicyRefused,
    QuotaExceeded,
    ValidationFailed,
)
from portal.core.models import AuditEvent
from tenants.selectors import remaining_gpu_eq


def submit(developer, tenant, offering, **kwargs):
    return gpu_request_submit(actor=developer, tenant=tenant, offering=offering, **kwargs)


def test_within_quota_and_policy_is_approved_at_once(developer, a100_tenant, catalog) -> None:
    slice_ = catalog["a100-80gb-mig-3g-40gb"]

    gpu_request = submit(developer, a100_tenant, slice_, count=1)

    assert gpu_request.state == RequestState.APPROVED
    assert gpu_request.gpu_eq == Fraction(3, 7)
    assert gpu_request.ends_at - gpu_request.starts_at == timedelta(hours=8)
    assert remaining_gpu_eq(a100_tenant, slice_.gpu_model) == 10 - Fraction(3, 7)
    event = AuditEvent.objects.get(action="gpu_request.submit")
    assert event.changes["state"] == [None, "approved"]


def test_above_policy_waits_for_a_lead(developer, a100_tenant, catalog) -> None:
    gpu_request = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=2)

    assert gpu_request.state == RequestState.PENDING
    assert remaining_gpu_eq(a100_tenant, gpu_request.gpu_model) == 10  # pending holds nothing


def test_longer_than_policy_waits_for_a_lead(developer, a100_tenant, catalog) -> None:
    gpu_request = submit(
        developer, a100_tenant, catalog["a100-80gb-whole"], count=1, duration_hours=9
    )

    assert gpu_request.state == RequestState.PENDING


def test_beyond_remaining_quota_is_refused_with_the_numbers(
    developer, a100_tenant, catalog
) -> None:
    gpu_request = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=11)

    assert gpu_request.state == RequestState.REJECTED
    assert "requested 11 GPU-eq, 10 of 10 remaining" in gpu_request.decision_comment


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"count": 0}, "count"),
        ({"count": -2}, "count"),
        ({"count": 1, "duration_hours": 1000}, "duration_hours"),
        ({"count": 1, "duration_hours": 0}, "duration_hours"),
        ({"count": 1, "purpose": "mining"}, "purpose"),
        # More GPU-eq than one exact amount may hold: refused, not stored and then failing.
        ({"count": 10**6 + 1}, "count"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    developer, a100_tenant, catalog, kwargs, field
) -> None:
    events = AuditEvent.objects.count()

    with pytest.raises(ValidationFailed) as refused:
        submit(developer, a100_tenant, catalog["a100-80gb-whole"], **kwargs)

    assert field in refused.value.fields
    assert AuditEvent.objects.count() == events


def test_a_model_without_quota_is_refused_naming_the_offering(
    developer, a100_tenant, catalog
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        submit(developer, a100_tenant, catalog["h100-80gb-whole"], count=1)

    assert "has no quota for NVIDIA H100-80GB-HBM3" in refused.value.fields["offering"][0]


def test_a_time_sliced_share_allows_one_per_request(developer, a100_tenant, catalog) -> None:
    with pytest.raises(ValidationFailed) as refused:
        submit(developer, a100_tenant, catalog["a100-80gb-time-slicing-1-4"], count=2)

    assert "at most 1" in refused.value.fields["count"][0]


def test_lead_approves_and_quota_is_checked_again(developer, lead, a100_tenant, catalog) -> None:
    pending = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=6)
    other = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=6)

    approved = gpu_request_approve(actor=lead, gpu_request=pending, comment="go")
    with pytest.raises(QuotaExceeded, match="requested 6 GPU-eq, 4 of 10 remaining"):
        gpu_request_approve(actor=lead, gpu_request=other)

    assert approved.state == RequestState.APPROVED
    assert approved.decided_by == lead
    other.refresh_from_db()
    assert other.state == RequestState.PENDING


def test_lead_cannot_approve_their_own_request_above_policy(lead, a100_tenant, catalog) -> None:
    own = gpu_request_submit(
        actor=lead, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=2
    )

    with pytest.raises(PermissionDenied, match="their own"):
        gpu_request_approve(actor=lead, gpu_request=own)


def test_developers_cannot_approve(developer, a100_tenant, catalog) -> None:
    pending = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=2)

    with pytest.raises(PermissionDenied):
        gpu_request_approve(actor=developer, gpu_request=pending)


def test_invalid_transitions_name_the_current_state(
    developer, lead, admin_user, a100_tenant, catalog
) -> None:
    approved = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=1)
    pending = submit(developer, a100_tenant, catalog["a100-80gb-whole"], count=2)
    gpu_request_reject(actor=lead, gpu_request=pending, comment="not now")

    with pytest.raises(InvalidTransition, match="is approved; it cannot be cancelled"):
        gpu_request_cancel(actor=developer, gpu_request=approved)
    with pytest.raises(InvalidTransition, match="is rejected; it cannot be approved"):
        gpu_request_approve(actor=admin_user, gpu_request=pending)
    with pytest.raises(InvalidTransition, match="is rejected; it cannot be released"):
        gpu_request_release(actor=developer, gpu_request=pending)


def test_cancel_release_and_revoke_give_quota_back(
    developer, admin_user, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]
    pending = submit(developer, a100_tenant, whole, count=2)
    first = submit(developer, a100_tenant, whole, count=1)
    second = submit(developer, a100_tenant, whole, count=1)

    gpu_request_cancel(actor=developer, gpu_request=pending)
    gpu_request_release(actor=developer, gpu_request=first)
    with pytest.raises(ValidationFailed):
        gpu_request_revoke(actor=admin_user, gpu_request=second, comment=" ")
    gpu_request_revoke(actor=admin_user, gpu_request=second, comment="maintenance")

    assert remaining_gpu_eq(a100_tenant, whole.gpu_model) == 10
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"gpu_request.cancel", "gpu_request.release", "gpu_request.revoke"} <= actions


def test_extension_within_policy_is_granted_and_beyond_needs_a_lead(
    developer, lead, a100_tenant, catalog
) -> None:
    allocation = submit(
        developer, a100_tenant, catalog["a100-80gb-whole"], count=1, duration_hours=4
    )
    end = allocation.ends_at

    extended = gpu_request_extend(actor=developer, gpu_request=allocation, hours=2)
    with pytest.raises(PolicyRefused, match="needs a lead"):
        gpu_request_extend(actor=developer, gpu_request=allocation, hours=9)
    by_lead = gpu_request_extend(actor=lead, gpu_request=allocation, hours=9)
    with pytest.raises(ValidationFailed, match="allows 168"):
        gpu_request_extend(actor=lead, gpu_request=allocation, hours=200)

    assert extended.ends_at == end + timedelta(hours=2)
    assert by_lead.ends_at == end + timedelta(hours=11)


def test_expiry_ends_due_allocations_once(developer, a100_tenant, catalog) -> None:
    whole = catalog["a100-80gb-whole"]
    due = submit(developer, a100_tenant, whole, count=1, duration_hours=1)
    later = submit(developer, a100_tenant, whole, count=1, duration_hours=8)
    in_two_hours = timezone.now() + timedelta(hours=2)

    first = allocations_expire(now=in_two_hours)
    second = allocations_expire(now=in_two_hours)

    assert (first, second) == (1, 0)
    due.refresh_from_db()
    later.refresh_from_db()
    assert due.state == RequestState.EXPIRED
    assert later.state == RequestState.APPROVED
    assert remaining_gpu_eq(a100_tenant, whole.gpu_model) == 9
