"""Idle allocations: what a tenant holds and barely uses, for its leads to release.

An allocation is idle when it still holds quota (approved or active), held GPUs during the
last `hours` hours (usage records with reserved GPU-eq-hours there), and its used GPU-hours in
that time are below `threshold` of what it reserved. Read from the hourly records: one grouped
query over the window, one for the allocations it names.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.db.models import Sum
from django.utils import timezone

from portal.allocations.models import HOLDING_STATES, GpuRequest
from portal.metering.collection import hour_floor
from portal.metering.models import UsageRecord
from portal.metering.selectors import UsageQueryError
from tenants.models import Tenant

DEFAULT_HOURS = 24
MAX_HOURS = 24 * 7
DEFAULT_THRESHOLD = Decimal("0.10")


@dataclass
class IdleAllocation:
    allocation: GpuRequest
    reserved: Fraction  # GPU-eq-hours in the window
    used_gpu_hours: Decimal

    @property
    def reserved_hours(self) -> Decimal:
        return Decimal(self.reserved.numerator) / Decimal(self.reserved.denominator)

    @property
    def utilisation(self) -> Decimal:
        """Used over reserved, as a fraction of 1."""
        return (self.used_gpu_hours / self.reserved_hours).quantize(Decimal("0.0001"))

    @property
    def percent(self) -> Decimal:
        return self.utilisation * 100


def idle_hours_check(hours: int) -> int:
    if not 1 <= hours <= MAX_HOURS:
        raise UsageQueryError("hours", f"Look back between 1 and {MAX_HOURS} hours.")
    return hours


def idle_allocations(
    *,
    tenant: Tenant,
    hours: int = DEFAULT_HOURS,
    threshold: Decimal = DEFAULT_THRESHOLD,
    now: datetime | None = None,
) -> list[IdleAllocation]:
    """The tenant's holding allocations used below `threshold` of their reservation in the last
    `hours` hours (whole hours, the current one included), least used first. Two queries."""
    idle_hours_check(hours)
    since = hour_floor((now or timezone.now()) - timedelta(hours=hours))
    holding = GpuRequest.objects.filter(tenant=tenant, state__in=HOLDING_STATES).values("pk")
    sums = (
        UsageRecord.objects.filter(tenant=tenant, hour__gte=since, allocation_id__in=holding)
        .order_by()
        .values("allocation_id", "reserved_den")
        .annotate(held=Sum("reserved_num"), busy=Sum("used_gpu_hours"))
    )
    reserved: dict[int, Fraction] = {}
    used: dict[int, Decimal] = {}
    for row in sums:
        pk = row["allocation_id"]
        reserved[pk] = reserved.get(pk, Fraction(0)) + Fraction(row["held"], row["reserved_den"])
        used[pk] = used.get(pk, Decimal(0)) + row["busy"]
    idle = {
        pk: held
        for pk, held in reserved.items()
        if held > 0 and Fraction(used[pk]) < held * Fraction(threshold)
    }
    allocations = GpuRequest.objects.filter(pk__in=idle).select_related(
        "requester", "offering", "gpu_model"
    )
    found = [IdleAllocation(a, idle[a.pk], used[a.pk]) for a in allocations]
    return sorted(found, key=lambda item: (item.utilisation, item.allocation.pk))
