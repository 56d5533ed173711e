"""GPU requests and allocations: the decision against quota and policy, and every transition.

A request's decision and its quota check run in one transaction that locks the tenant's quota
row for the GPU model, so concurrent requests are decided one after the other and can never
oversubscribe. Every transition is one call, one transaction, one audit event; an invalid one
raises InvalidTransition (409) naming the current state.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from fractions import Fraction

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, pgettext

from portal.accounts.models import MemberRole, User
from portal.allocations.decisions import (
    QuotaCheck,
    RequestPath,
    budget_hold,
    quota_check,
    request_path,
    request_validate,
    unserved_reason,
)
from portal.allocations.models import (
    HOLDING_STATES,
    ExtensionState,
    GpuRequest,
    GpuRequestExtension,
    Purpose,
    RequestState,
)
from portal.allocations.notifications import notify_on_commit
from portal.allocations.signals import allocation_state_changed
from portal.catalog.models import Offering
from portal.core.audit import audit_record
from portal.core.errors import (
    Conflict,
    InvalidTransition,
    PermissionDenied,
    PolicyRefused,
    QuotaExceeded,
    ValidationFailed,
)
from tenants.access import role_in
from tenants.models import Tenant, TenantState
from tenants.signals import tenant_changed

# Kept in English, whoever asked in which language; the pages show it in the reader's language
# ({% translate gpu_request.decision_comment %}).
APPROVED_AT_ONCE = gettext_noop("Approved at once: within quota and the tenant's policy.")


def _locked_quota_check(tenant: Tenant, offering: Offering, requested: Fraction) -> QuotaCheck:
    """The locked check for a decision; a model without quota is bad input naming the offering."""
    check = quota_check(tenant, offering, requested, lock=True)
    if check is None:
        raise ValidationFailed.on(
            "offering",
            _("Tenant %(tenant)s has no quota for %(model)s.")
            % {"tenant": tenant.slug, "model": offering.gpu_model.name},
        )
    return check


def _start(gpu_request: GpuRequest, *, now: datetime) -> None:
    gpu_request.starts_at = now
    gpu_request.ends_at = now + timedelta(hours=gpu_request.duration_hours)


@transaction.atomic
def gpu_request_submit(
    *,
    actor: User,
    tenant: Tenant,
    offering: Offering,
    count: int,
    duration_hours: int | None = None,
    purpose: str = Purpose.NOTEBOOK,
    justification: str = "",
) -> GpuRequest:
    """Ask for `count` units of `offering` in `tenant` and decide at once.

    Within remaining quota and the tenant's policy: approved (an allocation from now on).
    Within quota, above policy (or within it, when the tenant's budget holds its requests for a
    lead: `budget_hold`): pending for a lead. Beyond remaining quota, or for an offering that
    no GPU pool of any cluster serves (`unserved_reason`): rejected, with the numbers or the
    reason in the decision comment (the request is kept, so the refusal is on record).
    Bad input raises ValidationFailed naming the field, and nothing is written.
    """
    hours = duration_hours if duration_hours is not None else tenant.default_duration_hours
    request_validate(
        tenant=tenant, offering=offering, count=count, duration_hours=hours, purpose=purpose
    )
    requested = offering.gpu_eq * count
    # What does not depend on the quota is read before its row is locked: decisions of the same
    # tenant and model wait for each other only as long as they must.
    unserved = unserved_reason(offering)
    check = _locked_quota_check(tenant, offering, requested)
    now = timezone.now()
    gpu_request = GpuRequest(
        tenant=tenant,
        requester=actor,
        offering=offering,
        gpu_model=offering.gpu_model,
        count=count,
        duration_hours=hours,
        purpose=purpose,
        justification=justification.strip(),
    )
    gpu_request.gpu_eq = requested
    path = request_path(tenant=tenant, check=check, duration_hours=hours, served=not unserved)
    held = budget_hold(tenant, path)
    if held:
        path = RequestPath.LEAD
    if path == RequestPath.UNSERVED:
        gpu_request.state = RequestState.REJECTED
        gpu_request.decided_at = now
        gpu_request.decision_comment = f"{unserved}."
        gpu_request.refused_for = "unserved"
    elif path == RequestPath.EXCEEDS:
        gpu_request.refused_for = "quota"
        gpu_request.state = RequestState.REJECTED
        gpu_request.decided_at = now
        gpu_request.decision_comment = _("Exceeds the remaining quota: %(numbers)s.") % {
            "numbers": check.describe()
        }
    elif path == RequestPath.APPROVED:
        gpu_request.state = RequestState.APPROVED
        gpu_request.decided_at = now
        gpu_request.decision_comment = APPROVED_AT_ONCE
        _start(gpu_request, now=now)
    else:
        gpu_request.state = RequestState.PENDING
    gpu_request.save()
    audit_record(
        actor=actor,
        action="gpu_request.submit",
        target=gpu_request,
        tenant=tenant,
        changes={
            "state": [None, gpu_request.state],
            "offering": [None, offering.slug],
            "count": [None, count],
            "gpu_eq": [None, str(requested)],
            "duration_hours": [None, hours],
        },
        comment=gpu_request.decision_comment or held,
    )
    if gpu_request.state == RequestState.PENDING:
        notify_on_commit(gpu_request, "request.pending")
    elif gpu_request.state == RequestState.APPROVED:
        _provision(gpu_request, actor=actor, reason="allocation starts")
    return gpu_request


def _lock(gpu_request: GpuRequest, *, allowed: tuple[str, ...], verb: str) -> GpuRequest:
    """The request locked for a transition; InvalidTransition unless its state is `allowed`.
    `verb` (translated by the caller, context "cannot be") completes "it cannot be ..."."""
    locked = (
        GpuRequest.objects.select_for_update()
        .select_related("tenant", "offering", "gpu_model")
        .get(pk=gpu_request.pk)
    )
    if locked.state not in allowed:
        raise InvalidTransition(
            _("Request %(id)s is %(state)s; it cannot be %(verb)s.")
            % {"id": locked.pk, "state": locked.get_state_display(), "verb": verb}
        )
    return locked


def _provision(gpu_request: GpuRequest, *, actor: User | None, reason: str) -> None:
    tenant_changed.send(
        sender=GpuRequest,
        tenant=gpu_request.tenant,
        reason=f"request {gpu_request.pk}: {reason}",
        actor=actor,
        gpu_request=gpu_request,
    )


def _transition(
    gpu_request: GpuRequest,
    *,
    actor: User | None,
    to: RequestState,
    action: str,
    comment: str = "",
    extra: dict[str, list[object]] | None = None,
) -> GpuRequest:
    before = gpu_request.state
    gpu_request.state = to
    gpu_request.save()
    audit_record(
        actor=actor,
        action=f"gpu_request.{action}",
        target=gpu_request,
        tenant=gpu_request.tenant,
        changes={"state": [before, to], **(extra or {})},
        comment=comment,
    )
    if before in HOLDING_STATES and to not in HOLDING_STATES:
        _extensions_end_with(gpu_request, actor=actor)
    # Notebooks follow their allocation: stopped before its quota goes, started after the
    # quota is there (a notebook run waits for the runs queued before it).
    if to not in HOLDING_STATES:
        allocation_state_changed.send(
            sender=GpuRequest, allocation=gpu_request, before=before, actor=actor
        )
    # The namespace's quota follows the allocations that hold quota.
    if (before in HOLDING_STATES) != (to in HOLDING_STATES):
        _provision(
            gpu_request,
            actor=actor,
            reason="allocation starts" if to in HOLDING_STATES else "allocation ends",
        )
    if to in HOLDING_STATES:
        allocation_state_changed.send(
            sender=GpuRequest, allocation=gpu_request, before=before, actor=actor
        )
    return gpu_request


@transaction.atomic
def gpu_request_approve(*, actor: User, gpu_request: GpuRequest, comment: str = "") -> GpuRequest:
    """A lead (or admin) approves a pending request; quota is checked again, now.

    Leads may not approve their own requests (those above policy are why they wait).
    Raises QuotaExceeded (409) with the numbers when the quota no longer fits, Conflict when no
    GPU pool serves the offering any more, InvalidTransition when the tenant is not active.
    """
    locked = _lock(
        gpu_request, allowed=(RequestState.PENDING,), verb=pgettext("cannot be", "approved")
    )
    if not actor.is_portal_admin:
        if role_in(actor, locked.tenant) != MemberRole.LEAD:
            raise PermissionDenied(_("Only the tenant's leads and admins approve requests."))
        if locked.requester_id == actor.pk:
            raise PermissionDenied(_("Leads cannot approve their own requests above the policy."))
    if locked.tenant.state != TenantState.ACTIVE:
        raise InvalidTransition(
            _("Tenant %(tenant)s is %(state)s; its requests cannot be approved.")
            % {"tenant": locked.tenant.slug, "state": locked.tenant.state}
        )
    unserved = unserved_reason(locked.offering)
    if unserved:
        raise Conflict(f"{unserved}.", fields={"offering": [f"{unserved}."]})
    check = _locked_quota_check(locked.tenant, locked.offering, locked.gpu_eq)
    if not check.fits:
        raise QuotaExceeded(
            _("Request %(id)s no longer fits the quota: %(numbers)s.")
            % {"id": locked.pk, "numbers": check.describe()},
            fields={"quota": [check.describe()]},
        )
    now = timezone.now()
    locked.decided_by = actor
    locked.decided_at = now
    locked.decision_comment = comment.strip()
    _start(locked, now=now)
    approved = _transition(
        locked,
        actor=actor,
        to=RequestState.APPROVED,
        action="approve",
        comment=locked.decision_comment,
    )
    notify_on_commit(approved, "request.decided")
    return approved


@transaction.atomic
def gpu_request_reject(*, actor: User, gpu_request: GpuRequest, comment: str = "") -> GpuRequest:
    """A lead (or admin) rejects a pending request."""
    locked = _lock(
        gpu_request, allowed=(RequestState.PENDING,), verb=pgettext("cannot be", "rejected")
    )
    if not actor.is_portal_admin and role_in(actor, locked.tenant) != MemberRole.LEAD:
        raise PermissionDenied(_("Only the tenant's leads and admins reject requests."))
    locked.decided_by = actor
    locked.decided_at = timezone.now()
    locked.decision_comment = comment.strip()
    rejected = _transition(
        locked, actor=actor, to=RequestState.REJECTED, action="reject", comment=comment.strip()
    )
    notify_on_commit(rejected, "request.decided")
    return rejected


@transaction.atomic
def gpu_request_cancel(*, actor: User, gpu_request: GpuRequest) -> GpuRequest:
    """The requester withdraws a request that is still pending."""
    locked = _lock(
        gpu_request, allowed=(RequestState.PENDING,), verb=pgettext("cannot be", "cancelled")
    )
    if locked.requester_id != actor.pk:
        raise PermissionDenied(_("Only the requester cancels a request."))
    return _transition(locked, actor=actor, to=RequestState.CANCELLED, action="cancel")


@transaction.atomic
def gpu_request_release(*, actor: User, gpu_request: GpuRequest) -> GpuRequest:
    """The requester, a lead of the tenant or an admin gives an allocation's quota back."""
    locked = _lock(gpu_request, allowed=HOLDING_STATES, verb=pgettext("cannot be", "released"))
    may = (
        locked.requester_id == actor.pk
        or actor.is_portal_admin
        or role_in(actor, locked.tenant) == MemberRole.LEAD
    )
    if not may:
        raise PermissionDenied(
            _("Only the requester, the tenant's leads and admins release an allocation.")
        )
    locked.ends_at = timezone.now()
    return _transition(locked, actor=actor, to=RequestState.RELEASED, action="release")


@transaction.atomic
def gpu_request_idle_remind(*, actor: User, gpu_request: GpuRequest) -> GpuRequest:
    """A lead of the tenant (or an admin) tells an allocation's owner that it sits idle and asks
    them to release it: audited, and emailed (and sent to the webhook) after the commit."""
    locked = _lock(gpu_request, allowed=HOLDING_STATES, verb=pgettext("cannot be", "reminded of"))
    if not (actor.is_portal_admin or role_in(actor, locked.tenant) == MemberRole.LEAD):
        raise PermissionDenied(_("Only the tenant's leads and admins remind owners of idle GPUs."))
    audit_record(
        actor=actor,
        action="gpu_request.idle_remind",
        target=locked,
        tenant=locked.tenant,
        changes={},
    )
    notify_on_commit(locked, "allocation.idle")
    return locked


@transaction.atomic
def gpu_request_revoke(*, actor: User, gpu_request: GpuRequest, comment: str) -> GpuRequest:
    """An admin ends an allocation early, with a reason."""
    if not actor.is_portal_admin:
        raise PermissionDenied(_("Only admins revoke allocations."))
    if not comment.strip():
        raise ValidationFailed.on("comment", _("Say why the allocation is revoked."))
    locked = _lock(gpu_request, allowed=HOLDING_STATES, verb=pgettext("cannot be", "revoked"))
    locked.ends_at = timezone.now()
    locked.decided_by = actor
    locked.decision_comment = comment.strip()
    revoked = _transition(
        locked, actor=actor, to=RequestState.REVOKED, action="revoke", comment=comment.strip()
    )
    notify_on_commit(revoked, "allocation.revoked")
    return revoked


def _extension_refusal(locked: GpuRequest, *, hours: int) -> None:
    """What refuses `hours` more on the locked allocation now, whoever asks or decides: beyond
    the tenant's maximum duration (ValidationFailed naming `hours`), or a quota an admin forced
    below what is held (QuotaExceeded: nothing more is granted for the model, more time
    included, until the allocations fit it again)."""
    tenant = locked.tenant
    total = locked.duration_hours + hours
    if total > tenant.max_duration_hours:
        raise ValidationFailed.on(
            "hours",
            _("That makes %(total)s hours; %(tenant)s allows %(max)s.")
            % {"total": total, "tenant": tenant.slug, "max": tenant.max_duration_hours},
        )
    over = quota_check(tenant, locked.offering, Fraction(0), lock=True)
    if over is not None and over.remaining < 0:
        message = _(
            "%(model)s is over %(tenant)s's quota (%(numbers)s); nothing is extended until "
            "allocations fit it again."
        ) % {"model": locked.gpu_model.name, "tenant": tenant.slug, "numbers": over.describe()}
        raise QuotaExceeded(message, fields={"hours": [message]})


def _lengthen(locked: GpuRequest, *, hours: int) -> list[object]:
    """Add `hours` to the locked allocation's end (and clear its expiry notice, so the new end
    gets its own). Returns the end before and after, for the audit event."""
    before = locked.ends_at or timezone.now()  # holding requests always have an end
    locked.duration_hours += hours
    locked.ends_at = before + timedelta(hours=hours)
    locked.expiry_notice_sent_at = None
    locked.save()
    return [before.isoformat(), locked.ends_at.isoformat()]


def _may_decide_extensions(actor: User, tenant: Tenant, requester_ids: set[int]) -> bool:
    """Admins; and the tenant's leads, except on an allocation they asked for."""
    if actor.is_portal_admin:
        return True
    return role_in(actor, tenant) == MemberRole.LEAD and actor.pk not in requester_ids


def _needs_a_lead(tenant: Tenant, *, hours: int) -> str:
    """Why the requester's extension by `hours` waits for a lead; empty when granted at once:
    beyond the tenant's auto-approve hours, or held by its budget (`budget_hold`)."""
    if hours > tenant.auto_approve_hours:
        return _("%(tenant)s extends by up to %(hours)s hours at once") % {
            "tenant": tenant.slug,
            "hours": tenant.auto_approve_hours,
        }
    return budget_hold(tenant, RequestPath.APPROVED)


@transaction.atomic
def gpu_request_extend(
    *, actor: User, gpu_request: GpuRequest, hours: int, reason: str = ""
) -> GpuRequest:
    """Extend an allocation by `hours`: a new decision for the extra time.

    Granted at once when the whole duration stays within the tenant's maximum and the extra
    time within its auto-approve hours (and the tenant's budget does not hold its requests for a
    lead: `budget_hold`), or when a lead of the tenant (not the requester) or an admin asks.
    Otherwise a lead decides: with a `reason`, a pending GpuRequestExtension is created (set
    on the returned request as `extension_pending`; the allocation is unchanged), the leads
    are told and `gpu_request_extension_approve` extends it later; without one, PolicyRefused
    (422) naming `hours` says so. One extension waits per allocation: asking again while one
    waits is a Conflict (409), so retries never extend twice.
    """
    if hours < 1:
        raise ValidationFailed.on("hours", _("Extend by at least 1 hour."))
    locked = _lock(gpu_request, allowed=HOLDING_STATES, verb=pgettext("cannot be", "extended"))
    tenant = locked.tenant
    is_requester = locked.requester_id == actor.pk
    decides = _may_decide_extensions(actor, tenant, {locked.requester_id})
    if not (is_requester or decides):
        raise PermissionDenied(
            _("Only the requester, the tenant's leads and admins extend an allocation.")
        )
    _extension_refusal(locked, hours=hours)
    why = "" if decides else _needs_a_lead(tenant, hours=hours)
    if why:
        return _extension_ask(locked, actor=actor, hours=hours, reason=reason, why=why)
    changes = {"ends_at": _lengthen(locked, hours=hours)}
    audit_record(
        actor=actor,
        action="gpu_request.extend",
        target=locked,
        tenant=tenant,
        changes=changes,
        comment=reason.strip(),
    )
    return locked


def _extension_ask(
    locked: GpuRequest, *, actor: User, hours: int, reason: str, why: str
) -> GpuRequest:
    """The extension of `gpu_request_extend` that waits for a lead (see there)."""
    reason = reason.strip()
    if not reason:
        message = _(
            "Extending by %(hours)s hours needs a lead: %(why)s. Say why, and a lead decides."
        ) % {"hours": hours, "why": why}
        raise PolicyRefused(message, fields={"hours": [message]})
    waiting = GpuRequestExtension.objects.filter(
        request=locked, state=ExtensionState.PENDING
    ).first()
    if waiting is not None:
        raise Conflict(
            _(
                "Allocation %(id)s already has an extension waiting for a lead (%(hours)s "
                "hours); cancel it first or wait for the decision."
            )
            % {"id": locked.pk, "hours": waiting.hours},
            fields={"hours": [_("An extension is already waiting for a lead.")]},
        )
    extension = GpuRequestExtension.objects.create(
        request=locked, hours=hours, reason=reason, requested_by=actor
    )
    audit_record(
        actor=actor,
        action="gpu_request.extension_requested",
        target=locked,
        tenant=locked.tenant,
        changes={"extension": [None, extension.pk], "hours": [None, hours]},
        comment=reason,
    )
    notify_on_commit(locked, "extension.pending", extension=extension)
    locked.extension_pending = extension
    return locked


def _extension_lock(extension: GpuRequestExtension, *, verb: str) -> GpuRequestExtension:
    """The extension and its allocation, locked (the allocation first, as every transition of
    it does); InvalidTransition unless the extension is pending."""
    gpu_request = (
        GpuRequest.objects.select_for_update()
        .select_related("tenant", "offering", "gpu_model", "requester")
        .get(pk=extension.request_id)
    )
    locked = GpuRequestExtension.objects.select_for_update().get(pk=extension.pk)
    locked.request = gpu_request
    if locked.state != ExtensionState.PENDING:
        raise InvalidTransition(
            _("Extension %(id)s is %(state)s; it cannot be %(verb)s.")
            % {"id": locked.pk, "state": locked.get_state_display(), "verb": verb}
        )
    return locked


def _extension_decider(actor: User, locked: GpuRequestExtension) -> None:
    requester_ids = {locked.request.requester_id, locked.requested_by_id}
    if not _may_decide_extensions(actor, locked.request.tenant, requester_ids):
        raise PermissionDenied(
            _("Only the tenant's leads (not the requester) and admins decide extensions.")
        )


def _extension_decided(
    locked: GpuRequestExtension,
    *,
    actor: User | None,
    to: ExtensionState,
    comment: str,
    changes: dict[str, list[object]] | None = None,
) -> GpuRequestExtension:
    before = locked.state
    locked.state = to
    locked.decided_by = actor
    locked.decided_at = timezone.now()
    locked.decision_comment = comment.strip()
    locked.save()
    audit_record(
        actor=actor,
        action=f"gpu_request.extension_{to}",  # extension_approved, _rejected, _cancelled
        target=locked.request,
        tenant=locked.request.tenant,
        changes={
            "extension": [locked.pk, locked.pk],
            "extension_state": [before, to],
            **(changes or {}),
        },
        comment=locked.decision_comment,
    )
    return locked


@transaction.atomic
def gpu_request_extension_approve(
    *, actor: User, extension: GpuRequestExtension, comment: str = ""
) -> GpuRequestExtension:
    """A lead of the tenant (not the requester) or an admin grants a pending extension: the
    allocation is lengthened as `gpu_request_extend` does at once.

    Checked again now: an allocation that ended meanwhile is an InvalidTransition (409); beyond
    the tenant's maximum duration as it is now, a Conflict (409); a quota forced below what is
    held, QuotaExceeded (409). The requester is told after the commit.
    """
    locked = _extension_lock(extension, verb=pgettext("cannot be", "approved"))
    allocation = locked.request
    _extension_decider(actor, locked)
    if allocation.state not in HOLDING_STATES:
        raise InvalidTransition(
            _("Allocation %(id)s has ended (%(state)s); it cannot be extended.")
            % {"id": allocation.pk, "state": allocation.get_state_display()}
        )
    try:
        _extension_refusal(allocation, hours=locked.hours)
    except ValidationFailed as refused:
        # Valid when asked; the tenant's maximum changed since.
        raise Conflict(refused.fields["hours"][0], fields=refused.fields) from refused
    duration = [allocation.duration_hours, allocation.duration_hours + locked.hours]
    ends_at = _lengthen(allocation, hours=locked.hours)
    approved = _extension_decided(
        locked,
        actor=actor,
        to=ExtensionState.APPROVED,
        comment=comment,
        changes={"ends_at": ends_at, "duration_hours": list(duration)},
    )
    notify_on_commit(allocation, "extension.decided", extension=approved)
    return approved


@transaction.atomic
def gpu_request_extension_reject(
    *, actor: User, extension: GpuRequestExtension, comment: str = ""
) -> GpuRequestExtension:
    """A lead of the tenant (not the requester) or an admin refuses a pending extension; the
    allocation keeps its end. The requester is told after the commit."""
    locked = _extension_lock(extension, verb=pgettext("cannot be", "rejected"))
    _extension_decider(actor, locked)
    rejected = _extension_decided(locked, actor=actor, to=ExtensionState.REJECTED, comment=comment)
    notify_on_commit(rejected.request, "extension.decided", extension=rejected)
    return rejected


@transaction.atomic
def gpu_request_extension_cancel(
    *, actor: User, extension: GpuRequestExtension
) -> GpuRequestExtension:
    """Whoever asked withdraws a pending extension."""
    locked = _extension_lock(extension, verb=pgettext("cannot be", "cancelled"))
    if locked.requested_by_id != actor.pk:
        raise PermissionDenied(_("Only whoever asked for an extension cancels it."))
    return _extension_decided(locked, actor=actor, to=ExtensionState.CANCELLED, comment="")


def _extensions_end_with(gpu_request: GpuRequest, *, actor: User | None) -> None:
    """The allocation ended (inside that transaction): its waiting extension is cancelled, so
    no lead is left deciding on an allocation that is gone."""
    waiting = GpuRequestExtension.objects.select_for_update().filter(
        request=gpu_request, state=ExtensionState.PENDING
    )
    for extension in waiting:
        extension.request = gpu_request
        _extension_decided(
            extension,
            actor=actor,
            to=ExtensionState.CANCELLED,
            comment=_("The allocation ended (%(state)s) before a lead decided.")
            % {"state": gpu_request.get_state_display()},
        )


EXTENSION_DECISIONS = ("approve", "reject", "cancel")


def gpu_request_extension_transition(
    *, actor: User, extension: GpuRequestExtension, action: str, comment: str = ""
) -> GpuRequestExtension:
    """The decision named `action` on a pending extension, as the API and pages offer them."""
    if action == "approve":
        return gpu_request_extension_approve(actor=actor, extension=extension, comment=comment)
    if action == "reject":
        return gpu_request_extension_reject(actor=actor, extension=extension, comment=comment)
    if action == "cancel":
        return gpu_request_extension_cancel(actor=actor, extension=extension)
    raise ValidationFailed.on("action", _("Unknown action %(action)r.") % {"action": action})


def allocations_follow_tenant(*, tenant: Tenant, actor: User | None) -> list[GpuRequest]:
    """A tenant was suspended or archived (inside that transaction): end what it holds.

    Its allocations are revoked (their quota goes, their notebooks stop, reserved GPU-hours stop
    being charged) and its pending requests rejected, each with its own audit event and the
    reason in the decision comment. Ended, not paused: allocations are time-boxed, so most of
    their time would be gone by the time a suspension is lifted, and a suspended namespace may
    hold no GPUs anyway. Reactivating restores nothing: the team asks again. An active tenant's
    change is ignored. Returns the requests it ended.
    """
    if tenant.state == TenantState.ACTIVE:
        return []
    reason = _("Tenant %(tenant)s was %(state)s.") % {"tenant": tenant.slug, "state": tenant.state}
    now = timezone.now()
    ended = list(
        GpuRequest.objects.select_for_update()
        .select_related("tenant")
        .filter(tenant=tenant, state__in=(*HOLDING_STATES, RequestState.PENDING))
        .order_by("pk")
    )
    for gpu_request in ended:
        gpu_request.tenant = tenant  # the new state, for the receivers that follow
        gpu_request.decided_by = actor
        gpu_request.decision_comment = reason
        if gpu_request.state == RequestState.PENDING:
            gpu_request.decided_at = now
            _transition(
                gpu_request, actor=actor, to=RequestState.REJECTED, action="reject", comment=reason
            )
            notify_on_commit(gpu_request, "request.decided")
        else:
            gpu_request.ends_at = now
            _transition(
                gpu_request, actor=actor, to=RequestState.REVOKED, action="revoke", comment=reason
            )
            notify_on_commit(gpu_request, "allocation.revoked")
    return ended


def allocations_activate(*, request_ids: Iterable[int], comment: str) -> list[GpuRequest]:
    """Approved allocations that the cluster now holds quota for become active (others, already
    ended or active, are left as they are). Call inside the transaction that records why."""
    started = list(
        GpuRequest.objects.select_for_update()
        .select_related("tenant")
        .filter(pk__in=list(request_ids), state=RequestState.APPROVED)
    )
    for gpu_request in started:
        _transition(
            gpu_request, actor=None, to=RequestState.ACTIVE, action="activate", comment=comment
        )
    return started


def allocations_expire(*, now: datetime | None = None) -> int:
    """End every allocation past its end time, each in its own transaction. Returns how many.

    Safe to run twice or in two workers at once: rows are claimed with SKIP LOCKED and
    re-checked, so each allocation expires exactly once.
    """
    moment = now or timezone.now()
    expired = 0
    while True:
        with transaction.atomic():
            due = (
                GpuRequest.objects.select_for_update(skip_locked=True)
                .select_related("tenant")
                .filter(state__in=HOLDING_STATES, ends_at__lte=moment)
                .order_by("ends_at", "id")
                .first()
            )
            if due is None:
                return expired
            _transition(due, actor=None, to=RequestState.EXPIRED, action="expire")
            notify_on_commit(due, "allocation.expired")
            expired += 1


def allocations_notify_expiring(*, now: datetime | None = None) -> int:
    """Tell the owners of allocations ending within PORTAL_EXPIRY_NOTICE_MINUTES, once each
    (an extension clears the mark, so the new end gets its own notice). Returns how many."""
    moment = now or timezone.now()
    horizon = moment + timedelta(minutes=settings.PORTAL_EXPIRY_NOTICE_MINUTES)
    with transaction.atomic():
        due = list(
            GpuRequest.objects.select_for_update(skip_locked=True).filter(
                state__in=HOLDING_STATES,
                ends_at__gt=moment,
                ends_at__lte=horizon,
                expiry_notice_sent_at__isnull=True,
            )
        )
        for gpu_request in due:
            gpu_request.expiry_notice_sent_at = moment
            gpu_request.save(update_fields=["expiry_notice_sent_at"])
            notify_on_commit(gpu_request, "allocation.expiring")
    return len(due)


TRANSITIONS = ("approve", "reject", "cancel", "release", "extend", "revoke")


def gpu_request_transition(
    *,
    actor: User,
    gpu_request: GpuRequest,
    action: str,
    comment: str = "",
    hours: int = 0,
    reason: str = "",
) -> GpuRequest:
    """The transition named `action`, as the API and pages offer them; see each service."""
    if action == "approve":
        return gpu_request_approve(actor=actor, gpu_request=gpu_request, comment=comment)
    if action == "reject":
        return gpu_request_reject(actor=actor, gpu_request=gpu_request, comment=comment)
    if action == "cancel":
        return gpu_request_cancel(actor=actor, gpu_request=gpu_request)
    if action == "release":
        return gpu_request_release(actor=actor, gpu_request=gpu_request)
    if action == "extend":
        return gpu_request_extend(actor=actor, gpu_request=gpu_request, hours=hours, reason=reason)
    if action == "revoke":
        return gpu_request_revoke(actor=actor, gpu_request=gpu_request, comment=comment)
    raise ValidationFailed.on("action", _("Unknown action %(action)r.") % {"action": action})
