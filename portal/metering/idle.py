"""Idle allocations: what a tenant holds and barely uses, for its leads to release.

An allocation is idle when it still holds quota (approved or active), held GPUs during the
last `hours` hours (usage records with reserved GPU-eq-hours there), and its used GPU-hours in
that time are below `threshold` of what it reserved. Batch allocations are left out: their
pods are the tenant's own jobs, which usage cannot tie to an allocation. Read from the hourly
records: one grouped query over the window, one for the allocations it names.
"""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.utils import timezone
from django.utils.translation import gettext as _

from portal.allocations.models import HOLDING_STATES, GpuRequest, Purpose
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
        raise UsageQueryError(
            "hours", _("Look back between 1 and %(hours)s hours.") % {"hours": MAX_HOURS}
        )
    return hours


def idle_allocations(
    *,
    tenants: Collection[Tenant],
    hours: int = DEFAULT_HOURS,
    threshold: Decimal = DEFAULT_THRESHOLD,
    now: datetime | None = None,
) -> list[IdleAllocation]:
    """The tenants' holding allocations used below `threshold` of their reservation in the
    last `hours` hours (whole hours, the current one included), least used first. Two queries,
    whatever the number of tenants."""
    idle_hours_check(hours)
    since = hour_floor((now or timezone.now()) - timedelta(hours=hours))
    # A batch allocation's pods are the tenant's own jobs, which usage cannot tie to it: its
    # use is unknown, so it is never called idle.
    holding = (
        GpuRequest.objects.filter(tenant__in=tenants, state__in=HOLDING_STATES)
        .exclude(purpose=Purpose.BATCH)
        .values("pk")
    )
    sums = UsageRecord.objects.filter(
        tenant__in=tenants, hour__gte=since, allocation_id__in=holding
    ).measure_sums(["allocation_id"])
    idle = {
        pk: measures
        for (pk,), measures in sums.items()
        if measures.reserved > 0
        and Fraction(measures.used_gpu_hours) < measures.reserved * Fraction(threshold)
    }
    if not idle:
        return []
    allocations = GpuRequest.objects.filter(pk__in=idle).select_related(
        "requester", "offering", "gpu_model"
    )
    found = [IdleAllocation(a, idle[a.pk].reserved, idle[a.pk].used_gpu_hours) for a in allocations]
    return sorted(found, key=lambda item: (item.utilisation, item.allocation.pk))
