"""An open month's provisional statement totals, kept between readings.

Finance's Chargeback page and `GET /api/v1/statements/` list an open month's statement of every
tenant with usage, sorted and totalled by cost centre. Pricing a month of a thousand tenants'
usage by workload takes seconds (`pricing.month_priced`), and the usage changes only when a
window is collected. So each tenant's total is stored (`OpenMonthTotal`) with the `inputs` it
was priced from, and a reading prices again only the tenants whose stored total is missing,
was priced from other inputs, or is older than `REPRICE_AFTER`. The month's list then reads
the stored totals a page at a time (`open_month_totals`), as a closed month's statements are.

The inputs are read in one query (`usage_inputs`), and the catalog's version from the shared
cache:

- the newest row of the per-workload daily rollup, which pricing reads: collecting a window
  rewrites its day's rows (delete, then insert), so any new or collected-again usage moves it;
- the windows each cluster has collected (`MeteringState.windows_done`), counted in the
  transaction that writes a window's usage, so a window that commits after another cluster's
  window with newer rows still moves the inputs, and so does a window collected again (and
  how many clusters are metered);
- the newest capacity row, which the share of unreserved capacity is priced from;
- the newest rate card and how many there are (cards are never edited; one deleted moves the
  count);
- the newest metered cluster, and the catalog's version (an offering moved to another sharing
  backend moves it);
- the charge basis and whether unreserved capacity is charged (settings).

A change these do not see (usage deleted with no usage written after it; the catalog changed
where there is no shared cache) is priced at the latest `REPRICE_AFTER` later. One statement's
page and the month's close price from the usage records as before: never from these totals.

`services.open_months_price` (the periodic task `price_open_months`, every
PORTAL_METERING_SECONDS) prices the current month and the one before it, while open, as soon as
new usage is in: a reader seldom waits for it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Model, QuerySet
from django.utils import timezone

from portal.billing.models import OpenMonthTotal, RateCard
from portal.billing.pricing import (
    currencies_problem,
    line_currencies,
    month_priced,
    tenants_with_usage,
)
from portal.metering.kept import usage_inputs
from portal.metering.models import UsageCapacity, UsageWorkloadDaily
from tenants.models import Tenant

REPRICE_AFTER = timedelta(minutes=15)


@dataclass(frozen=True)
class ProvisionalTotal:
    """A tenant's open-month total and its currency, or `problem` (in the reader's language)
    when its rate cards are in more than one currency and it cannot be one statement."""

    currency: str  # read only without a problem
    total: Decimal
    problem: str


def priced_from(*, stamped: Sequence[type[Model]] = ()) -> tuple[object, ...]:
    """What an open month's totals are priced from (module docstring): whether unreserved
    capacity is charged, and `usage_inputs` of the tables pricing reads (and of `stamped`,
    for readings that carry those rows too). One query."""
    inputs = usage_inputs([UsageWorkloadDaily, UsageCapacity], counted=[RateCard], stamped=stamped)
    return (int(bool(settings.PORTAL_CHARGE_UNRESERVED)), *inputs)


def pricing_inputs(basis: str) -> str:
    """What an open month's totals on `basis` are priced from, as a short text (`priced_from`,
    which kept usage readings are keyed by too)."""
    return ":".join(str(value) for value in (basis, *priced_from()))


def _current(month: date, basis: str, inputs: str, now: datetime) -> QuerySet[OpenMonthTotal]:
    return OpenMonthTotal.objects.filter(
        month=month, basis=basis, inputs=inputs, priced_at__gt=now - REPRICE_AFTER
    ).order_by()


def _price_and_store(
    tenants: list[Tenant], month: date, *, basis: str, inputs: str, now: datetime
) -> list[OpenMonthTotal]:
    """Price `tenants`' month all at once and store their totals, priced from `inputs`."""
    priced = month_priced(tenants, month, basis=basis)
    rows = [
        OpenMonthTotal(
            month=month,
            basis=basis,
            tenant=tenant,
            currencies=",".join(sorted(line_currencies(priced[tenant.pk]))),
            total=priced[tenant.pk].total,
            inputs=inputs,
            priced_at=now,
        )
        for tenant in tenants
    ]
    # Two readers pricing at once write the same totals: the later one wins.
    OpenMonthTotal.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["month", "basis", "tenant"],
        update_fields=["currencies", "total", "inputs", "priced_at"],
    )
    return rows


def open_month_totals(
    tenants: QuerySet[Tenant] | None, month: date, *, basis: str
) -> QuerySet[OpenMonthTotal]:
    """The stored totals of those of `tenants` (None: every tenant) with usage in the open
    `month` on `basis`, every one current: the tenants whose total is missing or not current
    are priced first (all at once). For a list read a page at a time: sorted, counted and
    totalled in the database.

    After the pricing every tenant with usage has a total priced within REPRICE_AFTER, and
    those are the rows read: not narrowed to this reading's inputs, so a reader overtaken by
    another that stored newer totals reads those (never an empty or partial month), and not
    joined to the usage again (one range of the (month, basis, tenant) index, whatever the
    table's statistics). A tenant whose usage was deleted with nothing written after it stays
    listed until its total is REPRICE_AFTER old (module docstring)."""
    inputs = pricing_inputs(basis)
    now = timezone.now()
    current = _current(month, basis, inputs, now).values("tenant_id")
    missing = list(tenants_with_usage(month, tenants).exclude(pk__in=current))
    if missing:
        _price_and_store(missing, month, basis=basis, inputs=inputs, now=now)
    recent = OpenMonthTotal.objects.filter(
        month=month, basis=basis, priced_at__gt=now - REPRICE_AFTER
    )
    return recent if tenants is None else recent.filter(tenant__in=tenants)


def provisional_totals(
    tenants: list[Tenant], month: date, *, basis: str
) -> dict[int, ProvisionalTotal]:
    """Each of `tenants`' provisional total for the open `month` on `basis`, by tenant id: the
    stored one where it is current, priced now (all at once) and stored where it is not."""
    if not tenants:
        return {}
    inputs = pricing_inputs(basis)
    now = timezone.now()
    stored = {
        row.tenant_id: row
        for row in _current(month, basis, inputs, now).filter(
            tenant__in=[tenant.pk for tenant in tenants]
        )
    }
    missing = [tenant for tenant in tenants if tenant.pk not in stored]
    if missing:
        rows = _price_and_store(missing, month, basis=basis, inputs=inputs, now=now)
        stored |= {row.tenant_id: row for row in rows}
    totals = {}
    for tenant in tenants:
        totals[tenant.pk] = stored_total(stored[tenant.pk], tenant, month)
    return totals


def stored_total(row: OpenMonthTotal, tenant: Tenant, month: date) -> ProvisionalTotal:
    """`row` (of `tenant`, in `month`) as a total, with its problem when its rate cards are in
    more than one currency."""
    currencies = set(row.currencies.split(",")) - {""}
    return ProvisionalTotal(
        row.currencies, row.total, currencies_problem(tenant, month, currencies)
    )
