"""Reads of tenants beyond visibility (which is `Tenant.objects.visible_to`, tenants.access):
quotas and what is left of them, members, quota requests."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from django.db.models import Count, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Coalesce

from portal.accounts.models import MemberRole, User
from portal.catalog.cache import gpu_models_by_id
from portal.catalog.models import GpuModel
from portal.core.prepared import KeptRows
from portal.core.registry import Slot
from tenants.access import tenant_ids_of
from tenants.models import (
    Membership,
    Quota,
    QuotaRequest,
    QuotaRequestState,
    Tenant,
    TenantState,
)


def memberships_of(user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("tenant")


def tenants_with_member_count(tenants: QuerySet[Tenant]) -> QuerySet[Tenant]:
    """Tenants with their number of members (`member_count`), in the same query: a subquery per
    tenant read, so a page of 25 of a thousand tenants counts 25 tenants' members (a join
    grouped by tenant counted all 11,600 memberships before the LIMIT: 9 ms at scale 1)."""
    members = (
        Membership.objects.filter(tenant=OuterRef("pk"))
        .order_by()
        .values("tenant")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return tenants.annotate(member_count=Coalesce(Subquery(members), 0))


def tenants_with_members(tenants: QuerySet[Tenant]) -> QuerySet[Tenant]:
    """Tenants with their memberships (and users) prefetched and counted, in two queries."""
    return tenants_with_member_count(tenants).prefetch_related(
        Prefetch("memberships", queryset=Membership.objects.select_related("user"))
    )


# Tenant ids as a list, or as a query of ids (`values("pk")`), which runs inside the query that
# uses it: a thousand ids as parameters cost more to compile and plan than the query to run.
type TenantIds = list[int] | QuerySet[Any]

# What approved and active allocations hold, per (tenant id, GPU model id), for the given
# tenants (and only the given model, when not None). The allocations app fills this slot.
allocations_held: Slot[Callable[[TenantIds, int | None], dict[tuple[int, int], Fraction]]] = Slot(
    "allocation ledger", filled_by="the allocations app"
)


# The allocations holding one model's quota in one tenant, newest first, as (request id,
# GPU-eq): (tenant id, GPU model id) -> rows. The allocations app fills this slot too.
allocations_holding: Slot[Callable[[int, int], list[tuple[int, Fraction]]]] = Slot(
    "allocations holding a quota", filled_by="the allocations app"
)


# The (tenant id, GPU model id) quota lines whose allocations may hold more than the quota,
# of a query of tenant ids: a superset of those that do, found without reading every line (the
# allocations app fills this slot too).
allocations_over: Slot[Callable[[QuerySet[Any]], list[tuple[int, int]]]] = Slot(
    "quota lines maybe over", filled_by="the allocations app"
)


@dataclass(frozen=True)
class QuotaLine:
    """One GPU model's quota in a tenant: how much, how much allocations hold, what is left."""

    gpu_model: GpuModel
    quota: Fraction
    used: Fraction

    @property
    def remaining(self) -> Fraction:
        return self.quota - self.used


def _quotas_of(tenant_ids: list[int]) -> QuerySet[Quota, tuple[int, int, int, int]]:
    return (
        Quota.objects.filter(tenant_id__in=tenant_ids)
        .order_by()
        .values_list("tenant_id", "gpu_model_id", "gpu_eq_num", "gpu_eq_den")
    )


# Every page of tenants reads their quotas: the SQL built once per number of tenants.
_QUOTAS = KeptRows(Quota, _quotas_of)


def quota_lines_for(tenant_ids: Iterable[int]) -> dict[int, list[QuotaLine]]:
    """Each tenant's quota lines, in two queries whatever the number of tenants or allocations.

    Used = the exact sum of the GPU-eq that approved and active requests hold, per model.
    """
    ids = list(tenant_ids)
    used = allocations_held.get()(ids, None)
    lines: dict[int, list[QuotaLine]] = {tenant_id: [] for tenant_id in ids}
    # Plain values rather than a model instance per quota (some 150 on a page of 50 tenants),
    # the GPU models from the process's catalog rows (not joined), ordered by name here.
    quotas = _QUOTAS.rows(ids) if ids else []
    models = gpu_models_by_id({gpu_model_id for _tenant, gpu_model_id, _num, _den in quotas})
    for tenant_id, gpu_model_id, numerator, denominator in quotas:
        lines[tenant_id].append(
            QuotaLine(
                gpu_model=models[gpu_model_id],
                quota=Fraction(numerator, denominator),
                used=used.get((tenant_id, gpu_model_id), Fraction(0)),
            )
        )
    for tenant_lines in lines.values():
        tenant_lines.sort(key=lambda line: line.gpu_model.name)
    return lines


def quota_lines_over(tenant_ids: Iterable[int] | QuerySet[Any]) -> list[tuple[int, QuotaLine]]:
    """The quota lines whose allocations hold more than the quota (a quota lowered below what
    is held), as (tenant id, line), in at most four queries. Given a query of tenant ids
    (`values("pk")`, for when they may be many: an admin's every active tenant), PostgreSQL
    first picks the lines that may be over (`allocations_over`) and only their tenants are
    read and compared exactly; a thousand tenants' lines were read and compared here before
    (15 of the admin's Home's 26 ms in-process). Unlike `quota_lines_for` it builds a line only
    for those over."""
    ids: TenantIds
    if isinstance(tenant_ids, QuerySet):
        maybe = allocations_over.get()(tenant_ids)
        if not maybe:
            return []
        ids = sorted({tenant_id for tenant_id, _model in maybe})
    else:
        ids = list(tenant_ids)
    used = allocations_held.get()(ids, None)
    if not used:
        return []
    quotas = Quota.objects.filter(tenant_id__in=ids).order_by()
    over = []
    for tenant_id, gpu_model_id, numerator, denominator in quotas.values_list(
        "tenant_id", "gpu_model_id", "gpu_eq_num", "gpu_eq_den"
    ):
        held = used.get((tenant_id, gpu_model_id))
        # held > numerator / denominator, in integers (a Fraction per line costs more).
        if held is not None and held.numerator * denominator > numerator * held.denominator:
            over.append((tenant_id, gpu_model_id, Fraction(numerator, denominator)))
    models = GpuModel.objects.in_bulk({gpu_model_id for _tenant, gpu_model_id, _quota in over})
    return [
        (tenant_id, QuotaLine(models[gpu_model_id], quota, used[tenant_id, gpu_model_id]))
        for tenant_id, gpu_model_id, quota in over
    ]


def with_quota_lines[T: Sequence[Tenant]](tenants: T) -> T:
    """`tenants`, each with its quota lines set as `quota_lines` (`quota_lines_for`: two
    queries whatever the number of tenants), as `TenantSerializer` writes them."""
    lines = quota_lines_for(tenant.pk for tenant in tenants)
    for tenant in tenants:
        tenant.quota_lines = lines[tenant.pk]  # type: ignore[attr-defined]
    return tenants


def quota_lines(tenant: Tenant) -> list[QuotaLine]:
    return quota_lines_for([tenant.pk])[tenant.pk]


def gpu_eq_held(tenant: Tenant, gpu_model_id: int) -> Fraction:
    """What the tenant's approved and active allocations of one model hold, exactly (one query)."""
    held = allocations_held.get()([tenant.pk], gpu_model_id)
    return held.get((tenant.pk, gpu_model_id), Fraction(0))


def surplus_allocations(tenant: Tenant, gpu_model_id: int, quota: Fraction) -> list[int]:
    """The newest allocations of one model whose end would bring what the tenant holds back
    within `quota` (ids; none when it fits): those a quota forced below what is held leaves
    over it."""
    holding = allocations_holding.get()(tenant.pk, gpu_model_id)
    over = sum((gpu_eq for _, gpu_eq in holding), Fraction(0)) - quota
    surplus = []
    for pk, gpu_eq in holding:
        if over <= 0:
            break
        surplus.append(pk)
        over -= gpu_eq
    return surplus


def remaining_gpu_eq(tenant: Tenant, gpu_model: GpuModel) -> Fraction:
    """Quota minus what allocations hold, for one model (0 quota when none is set)."""
    quota = Quota.objects.filter(tenant=tenant, gpu_model=gpu_model).first()
    return (quota.gpu_eq if quota else Fraction(0)) - gpu_eq_held(tenant, gpu_model.pk)


def quota_requests_for(tenant: Tenant) -> QuerySet[QuotaRequest]:
    return QuotaRequest.objects.filter(tenant=tenant).select_related(
        "gpu_model", "requested_by", "decided_by"
    )


def quota_requests_pending() -> QuerySet[QuotaRequest]:
    """Every tenant's pending quota requests, oldest first: the admin's queue."""
    return (
        QuotaRequest.objects.filter(state=QuotaRequestState.PENDING)
        .select_related("tenant", "gpu_model", "requested_by")
        .order_by("created_at", "id")
    )


def has_tenant_access(user: User) -> bool:
    """Whether the user is a member of a tenant that is not archived."""
    return Membership.objects.filter(user=user).exclude(tenant__state=TenantState.ARCHIVED).exists()


def persona_of(user: User) -> str:
    """The user's main persona: the first of admin, finance, lead, developer that they are."""
    if user.is_portal_admin:
        return "admin"
    if user.is_finance:
        return "finance"
    if tenant_ids_of(user, [MemberRole.LEAD]):  # the user's roles, read once per request
        return "lead"
    return "developer"
