"""Reads of GPU requests. Who sees which is `GpuRequest.objects.visible_to` (tenants.access);
these add what the pages and API show with each request, and the request preview."""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db import router
from django.db.models import OuterRef, Q, QuerySet, Subquery
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
from portal.allocations.ledger import gpu_eq_held_by
from portal.allocations.models import (
    ExtensionState,
    GpuRequest,
    GpuRequestExtension,
    Purpose,
    RequestState,
)
from portal.catalog.gpu_eq import gpu_eq_display
from portal.catalog.models import Offering
from portal.core.bulk import count_of, counted_sql
from portal.core.registry import Slot
from portal.core.visibility import VisibleQuerySet, get_visible_or_404
from tenants.access import in_tenants_of_user, role_in, tenant_ids_of
from tenants.models import MemberRole, Quota, Tenant

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


@dataclass(frozen=True)
class WaitingReason:
    """Why a request or allocation that is not final has gone no further yet, in words for
    people; `code` names the case for tests and styles (lead, queued, running, retrying,
    failed, unserved, no-cluster, no-run, starting) and `link` a page that tells more."""

    code: str
    message: str
    link: str = ""


# Why approved allocations are not active yet, by id (an allocation with nothing to say is left
# out): their provisioning runs and the pools that serve them. The cluster app sits above this
# one, so it fills this slot with its reader when it is ready; it answers for a whole page of
# allocations in a bounded number of queries.
waiting_source: Slot[Callable[[list[GpuRequest]], dict[int, WaitingReason]]] = Slot(
    "waiting reason reader", filled_by="the cluster app"
)

# The ids of the offerings some GPU pool serves, among those given (see `unserved_reason`), for
# a whole list at once. Filled by the cluster app, as `waiting_source`.
served_offerings_source: Slot[Callable[[list[Offering]], set[int]]] = Slot(
    "served offerings reader", filled_by="the cluster app"
)


def with_waiting(rows: list[GpuRequest]) -> list[GpuRequest]:
    """`rows` with `.waiting` set: why each pending request or approved allocation waits
    (a WaitingReason), None for the others."""
    reasons = waiting_source.get()([row for row in rows if row.state == RequestState.APPROVED])
    for row in rows:
        if row.state == RequestState.PENDING:
            row.waiting = WaitingReason(  # type: ignore[attr-defined]
                code="lead",
                message=_("Waiting for a lead of %(tenant)s to decide.")
                % {"tenant": row.tenant.slug},
            )
        else:
            row.waiting = reasons.get(row.pk)  # type: ignore[attr-defined]
    return rows


@dataclass(frozen=True)
class OfferingChoice:
    """One offering as the request form lists it: whether a GPU pool serves it."""

    offering: Offering
    served: bool


def offerings_of_tenant(offerings: QuerySet[Offering], tenant: Tenant | None) -> QuerySet[Offering]:
    """Those of `offerings` whose GPU model `tenant` has a quota for (none without a tenant)."""
    if tenant is None:
        return offerings.none()
    models = Quota.objects.filter(tenant=tenant).values("gpu_model_id")
    return offerings.filter(gpu_model_id__in=models)


def offering_choices(
    offerings: QuerySet[Offering], tenant: Tenant | None
) -> list[tuple[str, list[OfferingChoice]]]:
    """The offerings of `tenant`'s GPU models, grouped by model name, each marked served or
    not. Three queries whatever the number of offerings."""
    listed = list(offerings_of_tenant(offerings, tenant).select_related("gpu_model", "backend"))
    served = served_offerings_source.get()(listed) if listed else set()
    groups: dict[str, list[OfferingChoice]] = {}
    for offering in listed:
        groups.setdefault(offering.gpu_model.name, []).append(
            OfferingChoice(offering=offering, served=offering.pk in served)
        )
    return list(groups.items())


# The catalog's offerings and GPU models (a few dozen rows) come in queries of their own, not in
# the join: PostgreSQL's planning time grows steeply with the tables of one join (a request
# with five joined tables took 3 ms to plan, longer than to read; make bench).
CATALOG_OF_REQUEST = ("offering", "gpu_model")


# What a list of requests joins; a pending request has no decider (its `decided_by` is None,
# read without a query), so the queues of pending ones leave it out (its columns were a
# quarter of the *Approvals* page's compiling).
_REQUEST_RELATED = ("tenant", "requester", "decided_by")


def _requests(related: tuple[str, ...] = _REQUEST_RELATED) -> VisibleQuerySet[GpuRequest]:
    return GpuRequest.objects.select_related(*related).prefetch_related(*CATALOG_OF_REQUEST)


def gpu_requests_for(user: User) -> QuerySet[GpuRequest]:
    """The requests `user` may see, with what a list shows of each."""
    return _requests().visible_to(user)


def gpu_requests_of(user: User) -> QuerySet[GpuRequest]:
    """The requests `user` asked for, as `gpu_requests_for` lists them: one's own requests are
    always one's to see, so no visibility filter is composed (and compiled) around them."""
    return _requests().filter(requester=user)


def gpu_request_for(user: User, pk: int) -> GpuRequest:
    """The request `pk` if `user` may see it; NotFound otherwise."""
    return get_visible_or_404(_requests(), user, pk=pk)


# The queues below are narrowed to the tenants a lead leads, without the visibility filter
# (own OR led tenants): inside the led tenants it adds nothing, since a lead sees every request
# there (`_visible_gpu_requests`), and composing it cost more than the navigation's count of
# the queues (`pending_approvals_count`, on every page). Admins see and decide everything.


def approvals_queue_for(user: User) -> QuerySet[GpuRequest]:
    """Pending requests a lead (or admin) may decide, oldest first."""
    pending = _requests(("tenant", "requester")).filter(state=RequestState.PENDING)
    pending = pending.order_by("created_at", "id")
    if user.is_portal_admin:
        return pending
    return pending.filter(in_tenants_of_user(user, [MemberRole.LEAD]))


_EXTENSION_RELATED = ("request__tenant", "request__requester", "requested_by", "decided_by")


def _extensions(
    related: tuple[str, ...] = _EXTENSION_RELATED,
) -> VisibleQuerySet[GpuRequestExtension]:
    return GpuRequestExtension.objects.select_related(*related).prefetch_related(
        *(f"request__{name}" for name in CATALOG_OF_REQUEST)
    )


def extensions_for(user: User) -> QuerySet[GpuRequestExtension]:
    """The extensions `user` may see (as their allocations), with what a list shows of each."""
    return _extensions().visible_to(user)


def extension_for(user: User, pk: int) -> GpuRequestExtension:
    """The extension `pk` if `user` may see it; NotFound otherwise."""
    return get_visible_or_404(_extensions(), user, pk=pk)


def extensions_queue_for(user: User) -> QuerySet[GpuRequestExtension]:
    """Pending extensions in the tenants a lead leads (every tenant's for an admin), oldest
    first; a lead's own are listed too (another lead or an admin decides them)."""
    # Without the decider, as the requests' queue.
    pending = _extensions(("request__tenant", "request__requester", "requested_by")).filter(
        state=ExtensionState.PENDING
    )
    if not user.is_portal_admin:
        pending = pending.filter(
            in_tenants_of_user(user, [MemberRole.LEAD], path="request__tenant")
        )
    return pending.order_by("created_at", "id")


def with_pending_extension_of_each(requests: QuerySet[GpuRequest]) -> QuerySet[GpuRequest]:
    """`requests`, each row with the extension waiting for a lead on it as `.pending_extension`
    (its id and hours; None when none waits), read by the rows' own statement: a page that
    polls until nothing waits must not read a row before a decision and its extensions after
    it (READ COMMITTED gives each statement its own snapshot), or it stops on an end not yet
    lengthened. See `pending_extension_of`."""
    waiting = GpuRequestExtension.objects.filter(
        request=OuterRef("pk"), state=ExtensionState.PENDING
    ).order_by()
    return requests.annotate(
        waiting_extension_id=Subquery(waiting.values("pk")[:1]),
        waiting_extension_hours=Subquery(waiting.values("hours")[:1]),
    )


def pending_extension_of(row: GpuRequest) -> GpuRequestExtension | None:
    """The extension a row of `with_pending_extension_of_each` has waiting (id and hours)."""
    pk = getattr(row, "waiting_extension_id", None)
    if pk is None:
        return None
    return GpuRequestExtension(
        pk=pk,
        request=row,
        hours=row.waiting_extension_hours,  # type: ignore[attr-defined]
        state=ExtensionState.PENDING,
    )


def pending_extensions_by_request(requests: list[GpuRequest]) -> dict[int, GpuRequestExtension]:
    """The extension waiting for a lead on each of `requests`, by request id (one query)."""
    waiting = GpuRequestExtension.objects.filter(
        request__in=[gpu_request.pk for gpu_request in requests], state=ExtensionState.PENDING
    )
    return {extension.request_id: extension for extension in waiting}


def pending_approvals_count(user: User) -> int:
    """How many requests and extensions wait for `user`'s decision: the queues above, leaving
    out a lead's own, which another lead decides. One query (with the user's tenants, read
    once per request, for a lead); none for someone who leads nothing. Counted from the two
    tables alone, not through the queues' querysets (their joined and prefetched rows are
    for the pages): it runs on every page a lead or an admin opens, so its SQL is built once
    per process for each number of tenants led (`_pending_count_plan`), and run with the
    user's own ids."""
    led = None if user.is_portal_admin else tenant_ids_of(user, [MemberRole.LEAD])
    if led == []:
        return 0
    using = router.db_for_read(GpuRequest)
    plan = _pending_count_plan(using, None if led is None else len(led))
    if plan is None:
        return 0
    sql, params = plan
    ids = {_USER_MARK: user.pk, **{_TENANT_MARK - i: tenant for i, tenant in enumerate(led or [])}}
    return count_of(using, sql, [ids.get(param, param) for param in params])


# Stand for the user's id and the ids of the tenants they lead while `_pending_count_plan`
# builds the SQL; found again among its parameters (no real id is negative).
_USER_MARK = -2_147_000_001
_TENANT_MARK = -2_147_000_002


@functools.lru_cache(maxsize=64)
def _pending_count_plan(using: str, led: int | None) -> tuple[str, list[Any]] | None:
    """The SQL of `pending_approvals_count` for an admin (`led` None) or a lead of `led`
    tenants, with marks where the ids go."""
    requests = GpuRequest.objects.using(using).filter(state=RequestState.PENDING)
    extensions = GpuRequestExtension.objects.using(using).filter(state=ExtensionState.PENDING)
    if led is not None:
        tenants = [_TENANT_MARK - i for i in range(led)]
        requests = requests.filter(tenant_id__in=tenants).exclude(requester_id=_USER_MARK)
        extensions = extensions.filter(request__tenant_id__in=tenants).exclude(
            Q(requested_by_id=_USER_MARK) | Q(request__requester_id=_USER_MARK)
        )
    return counted_sql([requests, extensions])


@dataclass(frozen=True)
class QuotaLeft:
    """What is left of a tenant's quota for one GPU model now, in GPU-eq (exact)."""

    quota: Fraction
    remaining: Fraction


def quota_left_for(requests: list[GpuRequest]) -> dict[tuple[int, int], QuotaLeft]:
    """The quota left for each (tenant id, GPU model id) of `requests`, in two queries; a pair
    without a quota is left out."""
    pairs = {(gpu_request.tenant_id, gpu_request.gpu_model_id) for gpu_request in requests}
    if not pairs:
        return {}
    tenant_ids = {tenant_id for tenant_id, _model in pairs}
    held = gpu_eq_held_by(tenant_ids)
    quotas = Quota.objects.filter(
        tenant_id__in=tenant_ids, gpu_model_id__in={model for _tenant, model in pairs}
    )
    return {
        key: QuotaLeft(quota=quota.gpu_eq, remaining=quota.gpu_eq - held.get(key, Fraction(0)))
        for quota in quotas
        if (key := (quota.tenant_id, quota.gpu_model_id)) in pairs
    }


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
        return _("Needs a lead's approval: %(reason)s.") % {"reason": held}
    policy = _("up to %(gpu_eq)s GPU-eq and %(hours)s h") % {
        "gpu_eq": gpu_eq_display(tenant.auto_approve_gpu_eq),
        "hours": tenant.auto_approve_hours,
    }
    names = {"tenant": tenant.slug, "policy": policy}
    if path == RequestPath.APPROVED:
        return _("Approved at once: within %(tenant)s's quota and policy (%(policy)s).") % names
    if path == RequestPath.LEAD:
        return (
            _("Needs a lead's approval: above %(tenant)s's auto-approve policy (%(policy)s).")
            % names
        )
    if path == RequestPath.EXCEEDS:
        return _("Exceeds the remaining quota: %(numbers)s.") % {"numbers": detail}
    return _("%(tenant)s has no quota for this GPU model (%(model)s).") % {
        "tenant": tenant.slug,
        "model": offering.gpu_model.name,
    }


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
