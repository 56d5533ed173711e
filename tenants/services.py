"""Every write to tenants, memberships, quotas and quota requests. One transaction and one
audit event each."""

from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.accounts.groups import tenant_group
from portal.accounts.models import MemberRole, User
from portal.catalog.gpu_eq import GpuEqError, GpuEqInput, gpu_eq_display, gpu_eq_parse
from portal.catalog.models import GpuModel
from portal.core.audit import audit_record, changes_between, snapshot
from portal.core.errors import (
    Conflict,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    ValidationFailed,
)
from portal.core.services import instance_update
from portal.core.validators import model_problems
from tenants import signals
from tenants.models import Membership, Quota, QuotaRequest, QuotaRequestState, Tenant, TenantState
from tenants.selectors import gpu_eq_held, surplus_allocations

TENANT_FIELDS = (
    "name",
    "cost_centre",
    "auto_approve_gpu_eq",
    "auto_approve_hours",
    "default_duration_hours",
    "max_duration_hours",
    "cpu_cores_quota",
    "memory_gib_quota",
    "storage_gib_quota",
    "notebook_idle_minutes",
)
# The fields the namespace's ResourceQuota is rendered from.
QUOTA_FIELDS = {"cpu_cores_quota", "memory_gib_quota", "storage_gib_quota"}


def _gpu_eq_field(field: str, value: GpuEqInput, *, positive: bool = False) -> Fraction:
    try:
        amount = gpu_eq_parse(value)
    except GpuEqError as error:
        raise ValidationFailed(
            _("%(field)s: %(error)s.") % {"field": field, "error": error},
            fields={field: [str(error)]},
        ) from None
    if positive and amount <= 0:
        raise ValidationFailed(
            _("%(field)s: must be more than 0.") % {"field": field},
            fields={field: [_("Must be more than 0.")]},
        )
    return amount


def _apply(tenant: Tenant, fields: dict[str, Any]) -> None:
    for field, value in _parsed(fields).items():
        setattr(tenant, field, value)


def _parsed(fields: dict[str, Any]) -> dict[str, Any]:
    if "auto_approve_gpu_eq" in fields:
        amount = _gpu_eq_field("auto_approve_gpu_eq", fields["auto_approve_gpu_eq"])
        return {**fields, "auto_approve_gpu_eq": amount}
    return fields


# Uniqueness is the slug's, checked apart; the duration constraint is _tenant_check's.
_CLEAN = {"validate_unique": False, "validate_constraints": False}


def _tenant_check(instance: Tenant) -> None:
    if instance.default_duration_hours > instance.max_duration_hours:
        raise ValidationFailed.on(
            "default_duration_hours", _("Must not be longer than the maximum duration.")
        )


def _full_clean(instance: Tenant, what: str) -> None:
    problems = model_problems(instance, **_CLEAN)
    if problems:
        raise ValidationFailed.of(what, problems)
    _tenant_check(instance)


@transaction.atomic
def tenant_create(
    *, actor: User | None, slug: str, name: str, cost_centre: str = "", **policy: Any
) -> Tenant:
    """Create an active tenant with the given policy fields (defaults for the rest).

    Raises ValidationFailed naming each bad field, Conflict if the slug is taken.
    """
    unknown = set(policy) - set(TENANT_FIELDS)
    if unknown:
        raise ValidationFailed(
            _("Unknown fields: %(fields)s.") % {"fields": ", ".join(sorted(unknown))}
        )
    tenant = Tenant(slug=slug, name=name, cost_centre=cost_centre)
    _apply(tenant, policy)
    _full_clean(tenant, "tenant")
    taken = Conflict(
        _("A tenant %(slug)s exists already.") % {"slug": repr(slug)},
        fields={"slug": [_("Taken.")]},
    )
    if Tenant.objects.filter(slug=slug).exists():
        raise taken
    try:
        with transaction.atomic():
            tenant.save()
    except IntegrityError:
        raise taken from None
    audit_record(
        actor=actor,
        action="tenant.create",
        target=tenant,
        tenant=tenant,
        changes=changes_between({}, snapshot(tenant, ("slug", *TENANT_FIELDS, "state"))),
    )
    _bundle_follows(tenant, reason="tenant created", actor=actor)
    signals.tenant_created.send(sender=Tenant, tenant=tenant, actor=actor)
    return tenant


@transaction.atomic
def tenant_update(*, actor: User, tenant: Tenant, **fields: Any) -> Tenant:
    """Change a tenant's name, cost centre, policy or resource quotas. Slug and state stay."""
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    changes = instance_update(
        actor=actor,
        instance=tenant,
        changes=_parsed(fields),
        allowed=TENANT_FIELDS,
        action="tenant.update",
        tenant=tenant,
        full_clean=_CLEAN,
        check=_tenant_check,
    )
    if changes.keys() & QUOTA_FIELDS:
        _bundle_follows(tenant, reason="resource quotas changed", actor=actor)
    return tenant


# state -> the states it may move to, per action
_STATE_ACTIONS = {
    "suspend": ({TenantState.ACTIVE}, TenantState.SUSPENDED),
    "reactivate": ({TenantState.SUSPENDED}, TenantState.ACTIVE),
    "archive": ({TenantState.ACTIVE, TenantState.SUSPENDED}, TenantState.ARCHIVED),
}


def state_after(action: str) -> str | None:
    """The state a tenant is in after `action` (None for an unknown action)."""
    return _STATE_ACTIONS[action][1] if action in _STATE_ACTIONS else None


@transaction.atomic
def tenant_change_state(*, actor: User, tenant: Tenant, action: str, comment: str = "") -> Tenant:
    """Suspend, reactivate or archive a tenant. Raises InvalidTransition from the wrong state."""
    if action not in _STATE_ACTIONS:
        raise ValidationFailed(
            _("Unknown action %(action)s.") % {"action": repr(action)},
            fields={"action": [_("Unknown.")]},
        )
    allowed_from, target = _STATE_ACTIONS[action]
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.state not in allowed_from:
        raise InvalidTransition(
            _("Tenant %(slug)s is %(state)s; it cannot %(action)s.")
            % {"slug": tenant.slug, "state": tenant.get_state_display(), "action": action}
        )
    before = tenant.state
    tenant.state = target
    tenant.save(update_fields=["state", "updated_at"])
    audit_record(
        actor=actor,
        action=f"tenant.{action}",
        target=tenant,
        tenant=tenant,
        changes={"state": [before, target]},
        comment=comment,
    )
    signals.tenant_state_changed.send(sender=Tenant, tenant=tenant, actor=actor)
    _bundle_follows(tenant, reason=f"tenant {target}", actor=actor)
    return tenant


def _bundle_follows(tenant: Tenant, *, reason: str, actor: User | None) -> None:
    """The tenant's Kubernetes bundle must follow this change (the cluster app queues a run)."""
    signals.tenant_changed.send(sender=Tenant, tenant=tenant, reason=reason, actor=actor)


def _members_changed(tenant: Tenant, *, username: str, role: str, actor: User | None) -> None:
    _bundle_follows(tenant, reason="members changed", actor=actor)
    signals.membership_changed.send(
        sender=Tenant, tenant=tenant, username=username, role=role, actor=actor
    )


def memberships_follow_identity_provider() -> bool:
    """With SSO on and the provider as the source, memberships change only at sign-in."""
    return settings.SSO_ENABLED and settings.PORTAL_MEMBERSHIP_SOURCE == "identity-provider"


def _refuse_unless_from_provider(tenant: Tenant, from_identity_provider: bool) -> None:
    if memberships_follow_identity_provider() and not from_identity_provider:
        leads, developers = (
            tenant_group(settings.PORTAL_TENANT_GROUP, tenant.slug, role)
            for role in (MemberRole.LEAD, MemberRole.DEVELOPER)
        )
        raise Conflict(
            _(
                "Memberships come from the identity provider: add the person to or remove them "
                "from %(leads)s or %(developers)s there; it applies at their next sign-in."
            )
            % {"leads": leads, "developers": developers}
        )


@transaction.atomic
def membership_set(
    *,
    actor: User | None,
    tenant: Tenant,
    user: User,
    role: MemberRole,
    from_identity_provider: bool = False,
) -> Membership:
    """Make `user` a member of `tenant` with `role`, adding or changing the membership.

    Raises Conflict when memberships follow the identity provider and this is not its sign-in.
    """
    _refuse_unless_from_provider(tenant, from_identity_provider)
    if role not in MemberRole.values:
        raise ValidationFailed(
            _("Unknown role %(role)s.") % {"role": repr(role)},
            fields={"role": [_("Unknown role.")]},
        )
    membership = Membership.objects.select_for_update().filter(tenant=tenant, user=user).first()
    if membership is None:
        membership = Membership.objects.create(tenant=tenant, user=user, role=role)
        audit_record(
            actor=actor,
            action="membership.add",
            target=membership,
            tenant=tenant,
            changes={"user": [None, user.username], "role": [None, str(role)]},
        )
    elif membership.role != role:
        before = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        audit_record(
            actor=actor,
            action="membership.change",
            target=membership,
            tenant=tenant,
            changes={"role": [before, str(role)]},
        )
    else:
        return membership
    _members_changed(tenant, username=user.username, role=str(role), actor=actor)
    return membership


@transaction.atomic
def membership_remove(
    *, actor: User | None, tenant: Tenant, username: str, from_identity_provider: bool = False
) -> None:
    """Remove the user named `username` from `tenant`. Raises NotFound if no such member, and
    Conflict when memberships follow the identity provider and this is not its sign-in."""
    _refuse_unless_from_provider(tenant, from_identity_provider)
    membership = (
        Membership.objects.select_for_update()
        .filter(tenant=tenant, user__username=username)
        .first()
    )
    if membership is None:
        raise NotFound(
            _("%(username)s is not a member of %(slug)s.")
            % {"username": username, "slug": tenant.slug}
        )
    audit_record(
        actor=actor,
        action="membership.remove",
        target=membership,
        tenant=tenant,
        changes={"user": [username, None], "role": [membership.role, None]},
    )
    membership.delete()
    _members_changed(tenant, username=username, role="", actor=actor)


@transaction.atomic
def quota_set(
    *,
    actor: User | None,
    tenant: Tenant,
    gpu_model: GpuModel,
    gpu_eq: GpuEqInput,
    force: bool = False,
) -> Quota:
    """Set the tenant's quota for `gpu_model` to `gpu_eq` GPU-equivalents (0 allowed).

    Lowering it below what the tenant's allocations of the model hold raises QuotaExceeded
    (409) naming the model, what is held and the new value, unless an admin `force`s it: the
    allocations over the new quota are then named in the audit event, and nothing more is
    granted for the model (requests, extensions) until they end and what is held fits again.
    Raising a quota that is still below what is held is allowed: it only gets closer.
    """
    amount = _gpu_eq_field("gpu_eq", gpu_eq)
    if force and not (actor is not None and actor.is_portal_admin):
        raise PermissionDenied(_("Only admins force a quota below what allocations hold."))
    quota = Quota.objects.select_for_update().filter(tenant=tenant, gpu_model=gpu_model).first()
    before = quota.gpu_eq if quota else Fraction(0)
    if quota is None:
        quota = Quota(tenant=tenant, gpu_model=gpu_model)
    if quota.pk is not None and before == amount:
        return quota
    # The quota row is locked: no request of this model is decided until this commits.
    held = gpu_eq_held(tenant, gpu_model.pk)
    changes: dict[str, list[Any]] = {"gpu_eq": [str(before), str(amount)]}
    comment = ""
    if amount < held and amount < before:
        numbers = {
            "model": gpu_model.name,
            "tenant": tenant.slug,
            "held": gpu_eq_display(held),
            "new": gpu_eq_display(amount),
        }
        if not force:
            message = (
                _(
                    "%(model)s: allocations in %(tenant)s hold %(held)s GPU-eq, more than the new "
                    "quota of %(new)s GPU-eq. Release or revoke allocations first, or force it."
                )
                % numbers
            )
            raise QuotaExceeded(message, fields={"gpu_eq": [message]})
        surplus = surplus_allocations(tenant, gpu_model.pk, amount)
        changes["over_quota_requests"] = [None, surplus]
        comment = _(
            "Forced below what allocations hold (%(held)s GPU-eq of %(model)s): requests "
            "%(requests)s are over the quota of %(new)s GPU-eq; nothing more is granted for "
            "%(model)s until what is held fits."
        ) % {**numbers, "requests": ", ".join(str(pk) for pk in surplus)}
    quota.gpu_eq = amount
    quota.save()
    audit_record(
        actor=actor,
        action="quota.set",
        target=quota,
        tenant=tenant,
        changes=changes,
        comment=comment,
    )
    _bundle_follows(tenant, reason="quota changed", actor=actor)
    return quota


@transaction.atomic
def quota_request_create(
    *, actor: User, tenant: Tenant, gpu_model: GpuModel, amount: GpuEqInput, reason: str
) -> QuotaRequest:
    """A lead asks for `amount` more GPU-eq of `gpu_model`; an admin decides."""
    value = _gpu_eq_field("amount", amount, positive=True)
    if not reason.strip():
        raise ValidationFailed(
            _("reason: say why the team needs it."), fields={"reason": [_("Required.")]}
        )
    quota_request = QuotaRequest(
        tenant=tenant, gpu_model=gpu_model, reason=reason.strip(), requested_by=actor
    )
    quota_request.amount = value
    quota_request.save()
    audit_record(
        actor=actor,
        action="quota_request.create",
        target=quota_request,
        tenant=tenant,
        changes={"amount": [None, str(value)], "gpu_model": [None, gpu_model.slug]},
        comment=quota_request.reason,
    )
    return quota_request


def _decide(
    quota_request: QuotaRequest, *, actor: User, state: QuotaRequestState, comment: str
) -> QuotaRequest:
    locked = QuotaRequest.objects.select_for_update().get(pk=quota_request.pk)
    if locked.state != QuotaRequestState.PENDING:
        raise InvalidTransition(
            _("Quota request %(pk)s is %(state)s, not pending.")
            % {"pk": locked.pk, "state": locked.get_state_display()}
        )
    locked.state = state
    locked.decided_by = actor
    locked.decided_at = timezone.now()
    locked.decision_comment = comment.strip()
    locked.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
    audit_record(
        actor=actor,
        action=f"quota_request.{'approve' if state == QuotaRequestState.APPROVED else 'reject'}",
        target=locked,
        tenant=locked.tenant,
        changes={"state": [QuotaRequestState.PENDING.value, state.value]},
        comment=locked.decision_comment,
    )
    return locked


@transaction.atomic
def quota_request_approve(
    *, actor: User, quota_request: QuotaRequest, comment: str = ""
) -> QuotaRequest:
    """Approve a pending request: the tenant's quota for the model grows by its amount."""
    decided = _decide(quota_request, actor=actor, state=QuotaRequestState.APPROVED, comment=comment)
    quota = (
        Quota.objects.select_for_update()
        .filter(tenant=decided.tenant, gpu_model=decided.gpu_model)
        .first()
    )
    current = quota.gpu_eq if quota else Fraction(0)
    quota_set(
        actor=actor,
        tenant=decided.tenant,
        gpu_model=decided.gpu_model,
        gpu_eq=current + decided.amount,
    )
    return decided


@transaction.atomic
def quota_request_reject(
    *, actor: User, quota_request: QuotaRequest, comment: str = ""
) -> QuotaRequest:
    """Reject a pending request; the quota stays as it is."""
    return _decide(quota_request, actor=actor, state=QuotaRequestState.REJECTED, comment=comment)


_STATE_TO_ACTION = {
    TenantState.SUSPENDED: "suspend",
    TenantState.ACTIVE: "reactivate",
    TenantState.ARCHIVED: "archive",
}


@transaction.atomic
def tenant_apply_changes(
    *,
    actor: User,
    tenant: Tenant,
    fields: dict[str, Any],
    state: str | None = None,
    quotas: dict[GpuModel, GpuEqInput] | None = None,
    force_quotas: bool = False,
) -> Tenant:
    """An admin's combined edit (the API's PATCH): fields, then quotas, then the state change,
    all or nothing. Each part records its own audit event. A quota below what is held is
    refused as in `quota_set`, on the field `quotas.<model slug>`, unless `force_quotas`."""
    if fields:
        tenant = tenant_update(actor=actor, tenant=tenant, **fields)
    for gpu_model, amount in (quotas or {}).items():
        try:
            quota_set(
                actor=actor, tenant=tenant, gpu_model=gpu_model, gpu_eq=amount, force=force_quotas
            )
        except (ValidationFailed, QuotaExceeded) as error:
            raise type(error)(
                error.message, fields={f"quotas.{gpu_model.slug}": error.fields.get("gpu_eq", [])}
            ) from None
    if state is not None and state != tenant.state:
        if state not in _STATE_TO_ACTION:
            raise ValidationFailed(
                _("state: unknown state %(state)s.") % {"state": repr(state)},
                fields={"state": [_("Unknown.")]},
            )
        tenant = tenant_change_state(
            actor=actor, tenant=tenant, action=_STATE_TO_ACTION[TenantState(state)]
        )
    return tenant


def memberships_apply_from_provider(
    user: User, wanted: dict[str, MemberRole]
) -> tuple[dict[str, list[Any]], list[str]]:
    """Add, change and remove the user's memberships to match `wanted`; return the before/after
    change and the wanted slugs that name no (live) tenant."""
    tenants = {
        tenant.slug: tenant
        for tenant in Tenant.objects.filter(slug__in=wanted).exclude(state=TenantState.ARCHIVED)
    }
    current = {
        membership.tenant.slug: membership
        for membership in Membership.objects.filter(user=user)
        .exclude(tenant__state=TenantState.ARCHIVED)
        .select_related("tenant")
    }
    for slug, role in wanted.items():
        if slug in tenants and (slug not in current or current[slug].role != role):
            membership_set(
                actor=None,
                tenant=tenants[slug],
                user=user,
                role=role,
                from_identity_provider=True,
            )
    for slug, membership in current.items():
        if slug not in wanted or slug not in tenants:
            membership_remove(
                actor=None,
                tenant=membership.tenant,
                username=user.username,
                from_identity_provider=True,
            )
    before = {slug: str(membership.role) for slug, membership in sorted(current.items())}
    after = {slug: str(role) for slug, role in sorted(wanted.items()) if slug in tenants}
    missing = sorted(slug for slug in wanted if slug not in tenants)
    return ({"memberships": [before, after]} if before != after else {}), missing
