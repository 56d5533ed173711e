"""Extensions beyond the tenant's policy wait for a lead: asked with a reason, decided by a lead
of the tenant (not the requester) or an admin, checked again at the decision, audited and told."""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import IntegrityError, transaction

from portal.accounts.models import User
from portal.accounts.services import user_create
from portal.allocations.models import (
    ExtensionState,
    GpuRequest,
    GpuRequestExtension,
    RequestState,
)
from portal.allocations.selectors import (
    approvals_queue_for,
    extensions_for,
    extensions_queue_for,
    gpu_requests_for,
    pending_approvals_count,
)
from portal.allocations.services import (
    allocations_expire,
    gpu_request_extend,
    gpu_request_extension_approve,
    gpu_request_extension_cancel,
    gpu_request_extension_reject,
    gpu_request_release,
    gpu_request_submit,
)
from portal.core.errors import (
    Conflict,
    InvalidTransition,
    PermissionDenied,
    PolicyRefused,
    QuotaExceeded,
    ValidationFailed,
)
from portal.core.models import AuditEvent
from tenants.access import tenants_led_by
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, quota_set, tenant_create, tenant_update
from tests.conftest import _person

WHOLE = "a100-80gb-whole"


@pytest.fixture
def allocation(developer, a100_tenant: Tenant, catalog) -> GpuRequest:
    """The developer's 1 A100 for 4 hours: within vision's policy (1 GPU-eq, 8 hours)."""
    granted = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=1, duration_hours=4
    )
    assert granted.state == RequestState.APPROVED
    return granted


@pytest.fixture
def second_lead(tenant_a: Tenant) -> User:
    user = _person("lead2")
    membership_set(actor=None, tenant=tenant_a, user=user, role=MemberRole.LEAD)
    return user


def ask(actor: User, allocation: GpuRequest, hours: int = 12, reason: str = "a long run"):
    extension = gpu_request_extend(
        actor=actor, gpu_request=allocation, hours=hours, reason=reason
    ).extension_pending
    assert extension is not None
    return extension


def actions() -> list[str]:
    return list(
        AuditEvent.objects.filter(action__startswith="gpu_request.ext")
        .order_by("id")
        .values_list("action", flat=True)
    )


def test_within_policy_the_allocation_is_extended_at_once(developer, allocation) -> None:
    end = allocation.ends_at

    extended = gpu_request_extend(actor=developer, gpu_request=allocation, hours=3, reason="more")

    assert extended.extension_pending is None
    assert extended.ends_at == end + timedelta(hours=3)
    assert not GpuRequestExtension.objects.exists()
    assert actions() == ["gpu_request.extend"]


def test_beyond_policy_without_a_reason_is_refused_by_policy_naming_hours(
    developer, allocation
) -> None:
    with pytest.raises(PolicyRefused, match="needs a lead") as refused:
        gpu_request_extend(actor=developer, gpu_request=allocation, hours=12)

    assert "Say why" in refused.value.message
    assert list(refused.value.fields) == ["hours"]
    assert not GpuRequestExtension.objects.exists()


def test_beyond_policy_with_a_reason_waits_for_a_lead_and_changes_nothing_yet(
    tasks_in_process, django_capture_on_commit_callbacks, developer, lead, allocation
) -> None:
    end = allocation.ends_at

    with django_capture_on_commit_callbacks(execute=True):
        extension = ask(developer, allocation, reason="  the training run needs a day  ")

    allocation.refresh_from_db()
    assert allocation.ends_at == end
    assert extension.state == ExtensionState.PENDING
    assert extension.reason == "the training run needs a day"
    assert extension.requested_by == developer
    event = AuditEvent.objects.get(action="gpu_request.extension_requested")
    assert event.target_id == str(allocation.pk)
    assert event.changes == {"extension": [None, extension.pk], "hours": [None, 12]}
    assert event.comment == "the training run needs a day"
    assert [message.to for message in mail.outbox] == [["lead@example.org"]]
    assert "waits for a lead" in mail.outbox[0].subject
    assert "the training run needs a day" in mail.outbox[0].body


def test_asking_again_while_one_waits_is_a_conflict_and_never_extends_twice(
    developer, lead, allocation
) -> None:
    first = ask(developer, allocation)

    with pytest.raises(Conflict, match="already has an extension waiting"):
        ask(developer, allocation)
    gpu_request_extension_approve(actor=lead, extension=first)
    with pytest.raises(InvalidTransition, match="is approved; it cannot be approved"):
        gpu_request_extension_approve(actor=lead, extension=first)

    allocation.refresh_from_db()
    assert allocation.duration_hours == 4 + 12
    assert GpuRequestExtension.objects.count() == 1


def test_the_database_holds_one_pending_extension_per_allocation(developer, allocation) -> None:
    ask(developer, allocation)

    with pytest.raises(IntegrityError), transaction.atomic():
        GpuRequestExtension.objects.create(
            request=allocation, hours=1, reason="around the service", requested_by=developer
        )


def test_a_lead_approves_with_a_comment_and_the_allocation_ends_later(
    tasks_in_process, django_capture_on_commit_callbacks, developer, lead, allocation
) -> None:
    GpuRequest.objects.filter(pk=allocation.pk).update(expiry_notice_sent_at=allocation.ends_at)
    end = allocation.ends_at
    extension = ask(developer, allocation)

    with django_capture_on_commit_callbacks(execute=True):
        approved = gpu_request_extension_approve(actor=lead, extension=extension, comment=" ok ")

    allocation.refresh_from_db()
    assert approved.state == ExtensionState.APPROVED
    assert approved.decided_by == lead
    assert approved.decision_comment == "ok"
    assert allocation.ends_at == end + timedelta(hours=12)
    assert allocation.duration_hours == 16
    assert allocation.expiry_notice_sent_at is None  # the new end gets its own notice
    event = AuditEvent.objects.get(action="gpu_request.extension_approved")
    assert event.actor == lead
    assert event.changes["extension_state"] == ["pending", "approved"]
    assert event.changes["ends_at"] == [end.isoformat(), allocation.ends_at.isoformat()]
    assert event.changes["duration_hours"] == [4, 16]
    assert mail.outbox[-1].to == ["dev@example.org"]
    assert f"Extending allocation {allocation.pk} by 12 h is approved" in mail.outbox[-1].subject


def test_a_lead_rejects_and_the_end_stays(
    tasks_in_process, django_capture_on_commit_callbacks, developer, lead, allocation
) -> None:
    end = allocation.ends_at
    extension = ask(developer, allocation)

    with django_capture_on_commit_callbacks(execute=True):
        rejected = gpu_request_extension_reject(
            actor=lead, extension=extension, comment="not this week"
        )

    allocation.refresh_from_db()
    assert rejected.state == ExtensionState.REJECTED
    assert allocation.ends_at == end
    assert actions() == ["gpu_request.extension_requested", "gpu_request.extension_rejected"]
    assert "not this week" in mail.outbox[-1].body
    assert "is rejected" in mail.outbox[-1].subject
    # Decided: the developer may ask again.
    assert ask(developer, allocation, hours=10).hours == 10


def test_a_developer_cannot_decide_and_only_the_asker_cancels(developer, lead, allocation) -> None:
    extension = ask(developer, allocation)

    with pytest.raises(PermissionDenied):
        gpu_request_extension_approve(actor=developer, extension=extension)
    with pytest.raises(PermissionDenied):
        gpu_request_extension_reject(actor=developer, extension=extension)
    with pytest.raises(PermissionDenied):
        gpu_request_extension_cancel(actor=lead, extension=extension)
    cancelled = gpu_request_extension_cancel(actor=developer, extension=extension)

    assert cancelled.state == ExtensionState.CANCELLED
    assert "gpu_request.extension_cancelled" in actions()


def test_a_lead_extending_their_own_allocation_waits_for_another_lead_or_an_admin(
    lead, second_lead, admin_user, a100_tenant, catalog
) -> None:
    own = gpu_request_submit(
        actor=lead, tenant=a100_tenant, offering=catalog[WHOLE], count=1, duration_hours=4
    )

    extension = ask(lead, own)
    with pytest.raises(PermissionDenied, match="not the requester"):
        gpu_request_extension_approve(actor=lead, extension=extension)
    approved = gpu_request_extension_approve(actor=second_lead, extension=extension)
    again = ask(lead, own, hours=9)
    by_admin = gpu_request_extension_approve(actor=admin_user, extension=again)

    assert approved.decided_by == second_lead
    assert by_admin.decided_by == admin_user
    own.refresh_from_db()
    assert own.duration_hours == 4 + 12 + 9


def test_a_lead_or_an_admin_still_extends_someone_elses_allocation_at_once(
    lead, admin_user, allocation
) -> None:
    by_lead = gpu_request_extend(actor=lead, gpu_request=allocation, hours=12)
    by_admin = gpu_request_extend(actor=admin_user, gpu_request=allocation, hours=12)

    assert by_lead.extension_pending is None
    assert by_admin.duration_hours == 4 + 24
    assert not GpuRequestExtension.objects.exists()


def test_a_maximum_lowered_before_the_decision_is_a_conflict(
    developer, lead, admin_user, allocation, a100_tenant
) -> None:
    extension = ask(developer, allocation, hours=100)
    tenant_update(actor=admin_user, tenant=a100_tenant, max_duration_hours=48)

    with pytest.raises(Conflict, match="allows 48") as refused:
        gpu_request_extension_approve(actor=lead, extension=extension)

    assert list(refused.value.fields) == ["hours"]
    extension.refresh_from_db()
    assert extension.state == ExtensionState.PENDING


def test_a_quota_forced_below_what_is_held_refuses_the_approval(
    developer, lead, admin_user, allocation, a100_tenant, catalog
) -> None:
    extension = ask(developer, allocation)
    quota_set(
        actor=admin_user,
        tenant=a100_tenant,
        gpu_model=catalog[WHOLE].gpu_model,
        gpu_eq=0,
        force=True,
    )

    with pytest.raises(QuotaExceeded, match="over vision's quota"):
        gpu_request_extension_approve(actor=lead, extension=extension)


@pytest.mark.parametrize("end", ["release", "expire"])
def test_an_allocation_that_ended_meanwhile_cancels_its_extension_and_answers_409(
    developer, lead, allocation, end: str
) -> None:
    extension = ask(developer, allocation)

    if end == "release":
        gpu_request_release(actor=developer, gpu_request=allocation)
    else:
        allocations_expire(now=allocation.ends_at + timedelta(minutes=1))
    with pytest.raises(InvalidTransition, match="is cancelled"):
        gpu_request_extension_approve(actor=lead, extension=extension)

    extension.refresh_from_db()
    assert extension.state == ExtensionState.CANCELLED
    assert "before a lead decided" in extension.decision_comment
    assert actions()[-1] == "gpu_request.extension_cancelled"


def test_beyond_the_maximum_is_bad_input_whoever_asks(developer, allocation) -> None:
    with pytest.raises(ValidationFailed, match="allows 168") as refused:
        ask(developer, allocation, hours=200)

    assert list(refused.value.fields) == ["hours"]
    assert not GpuRequestExtension.objects.exists()


def test_pending_approvals_count_is_what_the_user_may_decide(
    developer, lead, second_lead, admin_user, outsider, allocation, a100_tenant, catalog
) -> None:
    gpu_request_submit(actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=2)
    ask(developer, allocation)
    own = gpu_request_submit(actor=lead, tenant=a100_tenant, offering=catalog[WHOLE], count=2)
    assert own.state == RequestState.PENDING

    assert pending_approvals_count(lead) == 2  # not their own request
    assert pending_approvals_count(second_lead) == 3
    assert pending_approvals_count(admin_user) == 3
    assert pending_approvals_count(developer) == 0
    assert pending_approvals_count(outsider) == 0
    # The queues (and so the count) leave the visibility filter out: they are what each user
    # may see, pending, in the tenants they lead (every tenant for an admin).
    for user in (lead, second_lead, admin_user, developer, outsider):
        everywhere = user.is_portal_admin
        led = Tenant.objects.all() if everywhere else tenants_led_by(user)
        visible = gpu_requests_for(user).filter(state=RequestState.PENDING, tenant__in=led)
        assert {row.pk for row in approvals_queue_for(user)} == {row.pk for row in visible}
        visible_extensions = extensions_for(user).filter(
            state=ExtensionState.PENDING, request__tenant__in=led
        )
        assert {row.pk for row in extensions_queue_for(user)} == {
            row.pk for row in visible_extensions
        }


def test_pending_approvals_count_takes_at_most_two_queries_with_the_leads_tenants(
    django_assert_max_num_queries, lead, developer, allocation
) -> None:
    ask(developer, allocation)

    with django_assert_max_num_queries(2):
        assert pending_approvals_count(lead) == 1


def test_the_kept_count_sql_counts_each_leads_own_tenants(admin_user, catalog) -> None:
    """Two leads of two tenants each share the count's SQL (built once for two tenants) and
    each counts their own tenants' requests, not their own."""
    whole = catalog[WHOLE]
    leads, tenants = [], []
    for number in range(2):
        lead = user_create(actor=None, username=f"lead-of-two-{number}")
        leads.append(lead)
        for half in range(2):
            tenant = tenant_create(actor=None, slug=f"two-{number}-{half}", name="Two")
            quota_set(actor=admin_user, tenant=tenant, gpu_model=whole.gpu_model, gpu_eq=20)
            membership_set(actor=None, tenant=tenant, user=lead, role=MemberRole.LEAD)
            tenants.append(tenant)
    asker = user_create(actor=None, username="asker")
    for count, tenant in enumerate(tenants, start=1):
        membership_set(actor=None, tenant=tenant, user=asker, role=MemberRole.DEVELOPER)
        for _ in range(count):  # 1, 2 in the first lead's tenants; 3, 4 in the second's
            gpu_request_submit(actor=asker, tenant=tenant, offering=whole, count=2)
    own = gpu_request_submit(actor=leads[1], tenant=tenants[3], offering=whole, count=2)
    assert own.state == RequestState.PENDING

    assert [pending_approvals_count(lead) for lead in leads] == [3, 7]
    assert pending_approvals_count(admin_user) == 11
