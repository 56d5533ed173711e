"""The rules a GPU request is decided by: the input checks, the quota check, the tenant's
auto-approve policy, and the path that follows from them.

One definition for the decision itself (`gpu_request_submit` in services, which locks the quota
row first) and for its preview (`gpu_request_preview` in selectors, which writes nothing).
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from django.utils.translation import gettext as _

from portal.allocations.models import Purpose
from portal.catalog.gpu_eq import GPU_EQ_MAX, gpu_eq_display
from portal.catalog.models import Offering
from portal.core.errors import InvalidTransition, ValidationFailed
from portal.core.registry import Slot
from tenants.models import Quota, Tenant, TenantState
from tenants.selectors import gpu_eq_held

# Why a tenant's requests wait for a lead whatever their size (None: nothing holds them): the
# tenant is above this month's budget and its budget's policy asks for a lead. Billing sits
# above this app, so it fills this slot with its budgets when it is ready.
budget_source: Slot[Callable[[Tenant], str | None]] = Slot(
    "budget policy", filled_by="the billing app"
)

# Whether an allocation of an offering can become active: some cluster's GPU pools serve the
# offering's model with its sharing backend. Clusters sit above this app, so the cluster app
# fills this slot with its reader when it is ready.
served_source: Slot[Callable[[Offering], bool]] = Slot(
    "served offerings reader", filled_by="the cluster app"
)


class RequestPath(StrEnum):
    """What happens to a request: approved at once, waiting for a lead, refused for quota,
    refused because no GPU pool serves the offering, or refused as bad input because the tenant
    has no quota for the model at all."""

    APPROVED = "approved"
    LEAD = "lead"
    EXCEEDS = "exceeds"
    UNSERVED = "unserved"
    NO_QUOTA = "no-quota"


@dataclass(frozen=True)
class QuotaCheck:
    """The numbers behind a decision, in GPU-eq."""

    requested: Fraction
    remaining: Fraction
    quota: Fraction

    @property
    def fits(self) -> bool:
        return self.requested <= self.remaining

    def describe(self) -> str:
        return _("requested %(requested)s GPU-eq, %(remaining)s of %(quota)s remaining") % {
            "requested": gpu_eq_display(self.requested),
            "remaining": gpu_eq_display(self.remaining),
            "quota": gpu_eq_display(self.quota),
        }


def quota_check(
    tenant: Tenant, offering: Offering, requested: Fraction, *, lock: bool
) -> QuotaCheck | None:
    """What is left of the tenant's quota for the offering's model; None without a quota.

    With `lock`, the quota row is locked first (call inside a transaction): concurrent
    decisions for the same tenant and model then run one after the other.
    """
    quotas = Quota.objects.select_for_update() if lock else Quota.objects.all()
    quota = quotas.filter(tenant=tenant, gpu_model_id=offering.gpu_model_id).first()
    if quota is None:
        return None
    remaining = quota.gpu_eq - gpu_eq_held(tenant, offering.gpu_model_id)
    return QuotaCheck(requested=requested, remaining=remaining, quota=quota.gpu_eq)


def within_policy(tenant: Tenant, *, gpu_eq: Fraction, duration_hours: int) -> bool:
    """Whether the tenant's auto-approve policy covers this size and duration."""
    return gpu_eq <= tenant.auto_approve_gpu_eq and duration_hours <= tenant.auto_approve_hours


def request_validate(
    *, tenant: Tenant, offering: Offering, count: int, duration_hours: int, purpose: str
) -> None:
    """Bad input raises ValidationFailed naming the field; an inactive tenant, InvalidTransition."""
    if tenant.state != TenantState.ACTIVE:
        raise InvalidTransition(
            _("Tenant %(tenant)s is %(state)s; it cannot request GPUs.")
            % {"tenant": tenant.slug, "state": tenant.get_state_display()}
        )
    if not offering.enabled or not offering.gpu_model.enabled:
        raise ValidationFailed.on(
            "offering",
            _("%(offering)s is not offered at the moment.") % {"offering": offering.name},
        )
    if count < 1:
        raise ValidationFailed.on("count", _("Ask for at least 1."))
    if offering.max_units_per_workload and count > offering.max_units_per_workload:
        raise ValidationFailed.on(
            "count",
            _("%(offering)s allows at most %(max)s per request.")
            % {"offering": offering.name, "max": offering.max_units_per_workload},
        )
    if count * offering.gpu_eq > GPU_EQ_MAX:
        # The request's GPU-eq is stored exactly; beyond this it is no real request anyway.
        raise ValidationFailed.on(
            "count", _("At most %(max)s GPU-eq in one request.") % {"max": GPU_EQ_MAX}
        )
    if duration_hours < 1:
        raise ValidationFailed.on("duration_hours", _("Ask for at least 1 hour."))
    if duration_hours > tenant.max_duration_hours:
        raise ValidationFailed.on(
            "duration_hours",
            _("At most %(max)s hours in %(tenant)s.")
            % {"max": tenant.max_duration_hours, "tenant": tenant.slug},
        )
    if purpose not in Purpose.values:
        raise ValidationFailed.on(
            "purpose", _("Choose one of %(choices)s.") % {"choices": ", ".join(Purpose.values)}
        )


def unserved_reason(offering: Offering) -> str:
    """Why no allocation of `offering` could become active now; empty when a pool serves it.

    Refused rather than left for a lead: a lead cannot add a pool, and an approved request
    that no cluster can place would hold quota in "approved" for ever.
    """
    if served_source.get()(offering):
        return ""
    return _(
        "No GPU pool of any cluster serves %(offering)s (%(model)s shared by %(backend)s); "
        "an admin adds such a pool first"
    ) % {
        "offering": offering.name,
        "model": offering.gpu_model.name,
        "backend": offering.backend.name,
    }


def request_path(
    *, tenant: Tenant, check: QuotaCheck | None, duration_hours: int, served: bool
) -> RequestPath:
    """No quota for the model: no-quota. No pool serves the offering: unserved. Beyond
    remaining quota: exceeds. Within quota and the tenant's policy: approved at once. Within
    quota, above policy: a lead decides."""
    if check is None:
        return RequestPath.NO_QUOTA
    if not served:
        return RequestPath.UNSERVED
    if not check.fits:
        return RequestPath.EXCEEDS
    if within_policy(tenant, gpu_eq=check.requested, duration_hours=duration_hours):
        return RequestPath.APPROVED
    return RequestPath.LEAD


def budget_hold(tenant: Tenant, path: RequestPath) -> str:
    """Why a request the path would approve at once waits for a lead instead: the tenant's
    budget (see `budget_source`). Empty when nothing holds it; asked only for that path."""
    if path != RequestPath.APPROVED:
        return ""
    return budget_source.get()(tenant) or ""
