"""Unreserved capacity: the optional statement line that shares out the cost of the GPUs nobody
reserved (PORTAL_CHARGE_UNRESERVED, off by default).

Per GPU model and per rate card in effect during the month (a price that changes mid-month
splits the month's days between its cards), a tenant's line has the quantity

    max(capacity - all tenants' quantity, 0) x this tenant's quantity / all tenants' quantity

where capacity is the GPU-hours of the model the clusters had in those days (metering's
`UsageCapacity`, from the DCGM exporter: whole GPUs, a MIG-partitioned GPU is one) and the
quantities are the statement's charge basis summed over the tenants' usage records of that
model: reserved GPU-eq-hours (the line is "unreserved capacity"), or requested GPU-eq-hours
("unrequested capacity"), or used GPU-hours ("unused capacity"). So, whatever the basis, the
tenants together pay for every GPU-hour of the model, each in proportion to what it is charged
for. Quantities are exact fractions; the line is priced at the model's rate card for every
sharing backend (capacity has no backend), rounded once like every line.

No line when nobody had a quantity of the model (nothing to share in proportion to), when the
capacity is not above the tenants' quantity (never negative), or for usage of no known model.

The month's totals of every tenant come from two grouped queries (usage, capacity), so one
`unreserved_capacity` serves one tenant's statement or all of a month's.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Protocol, cast

from django.conf import settings
from django.db.models.functions import TruncDate

from portal.billing.models import Basis, RateCard, basis_quantity
from portal.catalog.gpu_eq import gpu_eq_sum_by
from portal.metering.models import UsageCapacity, UsageRecord

WORKLOADS = {
    Basis.RESERVED: "unreserved capacity",
    Basis.REQUESTED: "unrequested capacity",
    Basis.USED: "unused capacity",
}


class Rates(Protocol):
    """pricing.RateBook: the card in effect for a model and backend on a day."""

    def rate_for(
        self, gpu_model_id: int | None, backend_id: int | None, day: date
    ) -> RateCard | None: ...


@dataclass(frozen=True)
class UnreservedShare:
    """One tenant's share of a model's unreserved capacity at one rate card."""

    gpu_model: str
    workload: str
    rate_card: RateCard | None
    quantity: Fraction


@dataclass
class UnreservedCapacity:
    """A month's unreserved capacity, shared out: each tenant's lines by tenant id."""

    shares: dict[int, list[UnreservedShare]] = field(default_factory=dict)

    def of(self, tenant_id: int) -> list[UnreservedShare]:
        return self.shares.get(tenant_id, [])


def unreserved_capacity(
    begin: datetime, end: datetime, *, basis: str, rates: Rates
) -> UnreservedCapacity:
    """Every tenant's unreserved-capacity shares for the hours in [begin, end) (a month) on
    `basis` (module docstring). Nothing, and no query, while PORTAL_CHARGE_UNRESERVED is off."""
    if not settings.PORTAL_CHARGE_UNRESERVED:
        return UnreservedCapacity()
    capacity_rows = (
        UsageCapacity.objects.filter(hour__gte=begin, hour__lt=end, gpu_model__isnull=False)
        .annotate(day=TruncDate("hour", tzinfo=UTC))
    )  # fmt: skip
    present = gpu_eq_sum_by(
        capacity_rows, name="gpu_hours", group_by=("gpu_model_id", "gpu_model__name", "day")
    )
    if not present:
        return UnreservedCapacity()
    usage = (
        UsageRecord.objects.filter(
            hour__gte=begin, hour__lt=end, tenant__isnull=False, gpu_model__isnull=False
        )
        .annotate(day=TruncDate("hour", tzinfo=UTC))
        .measure_sums(["tenant_id", "gpu_model_id", "day"])
    )
    # Per (model, rate card): the capacity, every tenant's quantity, each tenant's quantity.
    cards: dict[tuple[int, int | None], RateCard | None] = {}
    names: dict[int, str] = {}
    capacity: dict[tuple[int, int | None], Fraction] = defaultdict(Fraction)
    for group, gpu_hours in present.items():
        model_id, name, day = cast("tuple[int, str, date]", group)
        card = rates.rate_for(model_id, None, day)
        key = (model_id, card.pk if card else None)
        cards[key], names[model_id] = card, name
        capacity[key] += gpu_hours
    everyone: dict[tuple[int, int | None], Fraction] = defaultdict(Fraction)
    tenants: dict[int, dict[tuple[int, int | None], Fraction]] = defaultdict(
        lambda: defaultdict(Fraction)
    )
    for group, measures in usage.items():
        tenant_id, model_id, day = cast("tuple[int, int, date]", group)
        if model_id not in names:
            continue  # no capacity of the model was seen: nothing to share
        card = rates.rate_for(model_id, None, day)
        key = (model_id, card.pk if card else None)
        quantity = basis_quantity(measures, basis)
        everyone[key] += quantity
        tenants[tenant_id][key] += quantity
    workload = WORKLOADS[Basis(basis)]
    shares: dict[int, list[UnreservedShare]] = {}
    for tenant_id, quantities in tenants.items():
        lines = []
        for key, quantity in quantities.items():
            unreserved = capacity[key] - everyone[key]
            if quantity <= 0 or unreserved <= 0:
                continue
            card = cards.get(key)
            lines.append(
                UnreservedShare(
                    names[key[0]], workload, card, unreserved * quantity / everyone[key]
                )
            )
        lines.sort(key=lambda share: (share.gpu_model, _effective(share.rate_card)))
        if lines:
            shares[tenant_id] = lines
    return UnreservedCapacity(shares)


def _effective(card: RateCard | None) -> date:
    return card.effective_from if card is not None else date.min
