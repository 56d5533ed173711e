"""Reads of GPU requests. Who sees which is `GpuRequest.objects.visible_to` (tenants.access);
these add what the pages and API show with each request, and the request preview."""

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.allocations.decisions import (
    RequestPath,
    budget_hold,
    quota_check,
    request_path,
    request_validate,
    unserved_reason,
)
from portal.allocations.models import GpuRequest, Purpose
from portal.catalog.gpu_eq import gpu_eq_display
from portal.catalog.models import Offering
from portal.core.registry import Slot
from portal.core.visibility import VisibleQuerySet, get_visible_or_404
from tenants.access import role_in, tenants_led_by
from tenants.models import MemberRole, Tenant

# How many units of an offering the clusters have free now (None: not read yet). The cluster
# app sits above this one, so it fills this slot with its reader when it is ready.
capacity_source: Slot[Callable[[Offering], int | None]] = Slot(
    "free capacity reader", filled_by="the cluster app"
)


@dataclass(frozen=True)
class PriceQuote:
    """What GPUs cost at today's price: per hour, and for a whole duration (to the cent)."""

    currency: str
    per_hour: Decimal
    total: Decimal
    hours: int


# The price of `gpu_eq` GPU-eq of an offering for some hours (None: nobody priced its model).
# Billing sits above this app, so it fills this slot with its rate cards when it is ready.
price_source: Slot[Callable[[Offering, Fraction, int], PriceQuote | None]] = Slot(
    "price quoter", filled_by="the billing app"
)

# What allocations cost so far (or in all, once ended), as text like "12.40 EUR", by id; an
# allocation with no price is left out. Filled by the billing app, as `price_source`.
cost_source: Slot[Callable[[list[GpuRequest]], dict[int, str]]] = Slot(
    "allocation cost reader", filled_by="the billing app"
)


def with_costs[T](rows: list[T], allocation_of: Callable[[T], GpuRequest]) -> list[T]:
    """`rows` with `.cost` set from their allocations' cost so far (None: not priced)."""
    costs = cost_source.get()([allocation_of(row) for row in rows])
    for row in rows:
        row.cost = costs.get(allocation_of(row).pk)  # type: ignore[attr-defined]
    return rows


def _requests() -> VisibleQuerySet[GpuRequest]:
    return GpuRequest.objects.select_related(
        "tenant", "requester", "offering", "gpu_model", "decided_by"
    )


def gpu_requests_for(user: User) -> QuerySet[GpuRequest]:
    """The requests `user` may see, with what a list shows of each."""
    return _requests().visible_to(user)


def gpu_request_for(user: User, pk: int) -> GpuRequest:
    """The request `pk` if `user` may see it; NotFound otherwise."""
    return get_visible_or_404(_requests(), user, pk=pk)


def approvals_queue_for(user: User) -> QuerySet[GpuRequest]:
    """Pending requests a lead (or admin) may decide, oldest first."""
    pending = gpu_requests_for(user).filter(state="pending").order_by("created_at", "id")
    if user.is_portal_admin:
        return pending
    return pending.filter(tenant__in=tenants_led_by(user))


@dataclass(frozen=True)
class GpuRequestPreview:
    """What a request would get now, decided by the rules `gpu_request_submit` applies; GPU-eq
    figures are exact. Quota figures are None when the tenant has no quota for the model."""

    path: RequestPath
    tenant: Tenant
    offering: Offering
    count: int
    duration_hours: int
    gpu_eq: Fraction
    quota: Fraction | None
    used: Fraction | None
    remaining: Fraction | None
    remaining_after: Fraction | None
    auto_approve_gpu_eq: Fraction
    auto_approve_hours: int
    max_duration_hours: int
    free_units: int | None
    can_ask_quota: bool
    message: str
    price: PriceQuote | None = None


def _preview_message(
    path: RequestPath, tenant: Tenant, offering: Offering, detail: str, held: str = ""
) -> str:
    if path == RequestPath.UNSERVED:
        return _("Refused: %(reason)s.") % {"reason": detail}
    if held:
        return f"Needs a lead's approval: {held}."
    policy = (
        f"up to {gpu_eq_display(tenant.auto_approve_gpu_eq)} GPU-eq and "
        f"{tenant.auto_approve_hours} h"
    )
    if path == RequestPath.APPROVED:
        return f"Approved at once: within {tenant.slug}'s quota and policy ({policy})."
    if path == RequestPath.LEAD:
        return f"Needs a lead's approval: above {tenant.slug}'s auto-approve policy ({policy})."
    if path == RequestPath.EXCEEDS:
        return f"Exceeds the remaining quota: {detail}."
    return f"{tenant.slug} has no quota for this GPU model ({offering.gpu_model.name})."


def gpu_request_preview(
    *,
    user: User,
    tenant: Tenant,
    offering: Offering,
    count: int,
    duration_hours: int | None = None,
    purpose: str = Purpose.NOTEBOOK,
) -> GpuRequestPreview:
    """The path and numbers `gpu_request_submit` would decide on now, writing nothing.

    `tenant` is one the user may request GPUs in (the caller looks it up). Bad input raises
    ValidationFailed naming the field, as the submission would.
    """
    hours = duration_hours if duration_hours is not None else tenant.default_duration_hours
    request_validate(
        tenant=tenant, offering=offering, count=count, duration_hours=hours, purpose=purpose
    )
    requested = offering.gpu_eq * count
    check = quota_check(tenant, offering, requested, lock=False)
    unserved = unserved_reason(offering)
    path = request_path(tenant=tenant, check=check, duration_hours=hours, served=not unserved)
    held = budget_hold(tenant, path)
    if held:
        path = RequestPath.LEAD
    return GpuRequestPreview(
        path=path,
        tenant=tenant,
        offering=offering,
        count=count,
        duration_hours=hours,
        gpu_eq=requested,
        quota=check.quota if check else None,
        used=check.quota - check.remaining if check else None,
        remaining=check.remaining if check else None,
        remaining_after=check.remaining - requested if check else None,
        auto_approve_gpu_eq=tenant.auto_approve_gpu_eq,
        auto_approve_hours=tenant.auto_approve_hours,
        max_duration_hours=tenant.max_duration_hours,
        free_units=capacity_source.get()(offering),
        can_ask_quota=role_in(user, tenant) == MemberRole.LEAD,
        message=_preview_message(
            path, tenant, offering, unserved or (check.describe() if check else ""), held
        ),
        price=price_source.get()(offering, requested, hours),
    )


def pending_approvals_count(user: User) -> int:
    """How many pending requests `user` may decide (the Approvals badge): one count query."""
    return approvals_queue_for(user).count()
