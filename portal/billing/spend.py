"""Spend per tenant per month over a range of months: the chart on the chargeback page and
`GET /api/v1/spend/`.

A closed month's numbers are its stored statements' totals (one query for every closed month).
An open month is priced from the daily rollup (`UsageDaily`, one grouped query for every open
month of the range) instead of pricing each tenant's hourly records: rate cards take effect by
day, so a day's quantity per GPU model and offering finds its card exactly, and with it the day's
requested CPU core-hours and memory GiB-hours their prices on that card. Its amount is the
exact price of the month's quantities, rounded once to the cent per tenant and month; a
statement rounds each of its lines (model x offering x user x workload x card) instead, so an
open month's number is *provisional, approx.*: it may differ from the provisional statement's
total by less than a cent per statement line (README, "Spend per month").
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

from django.conf import settings
from django.db.models import Q
from django.utils.translation import gettext

from portal.accounts.models import User
from portal.billing.models import Basis, Period, PeriodState, Statement
from portal.billing.pricing import CENT, CPU, GPU, RAM, RateBook, card_price, month_bounds
from portal.billing.selectors import month_of, tenants_seen
from portal.catalog.models import Offering
from portal.core.errors import NotFound, ValidationFailed
from portal.metering.models import UsageDaily
from tenants.models import Tenant

# The longest range one answer covers, and the range the page charts.
MAX_MONTHS = 24
CHART_MONTHS = 12
# The chart's series: the biggest tenants of a currency, the rest summed as "other tenants".
TOP_TENANTS = 8
OTHER = "_other"  # the other tenants' series (no tenant slug starts with "_")


@dataclass(frozen=True)
class SpendRow:
    """A tenant's total for a month: final (its stored statement) or provisional, approx.
    (priced from the daily rollup now)."""

    month: date
    tenant: Tenant
    cost_centre: str
    currency: str
    total: Decimal
    final: bool
    problem: str = ""  # why it is not priced (rate cards in two currencies)

    @property
    def approximate(self) -> bool:
        return not self.final


def shift(month: date, months: int) -> date:
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def months_between(first: date, last: date) -> list[date]:
    count = (last.year - first.year) * 12 + last.month - first.month + 1
    return [shift(first, offset) for offset in range(count)]


def spend_range(
    first_text: str | None, last_text: str | None, *, default_last: date
) -> tuple[date, date]:
    """The months `from` to `to` (YYYY-MM, inclusive): by default the CHART_MONTHS months up to
    `default_last`; ValidationFailed naming the field for a bad month, an end before the start
    or more than MAX_MONTHS months."""
    last = month_of(last_text, field="to") if last_text else default_last
    first = month_of(first_text, field="from") if first_text else shift(last, 1 - CHART_MONTHS)
    if first > last:
        raise ValidationFailed.on("to", gettext("The last month must not be before the first."))
    if len(months_between(first, last)) > MAX_MONTHS:
        raise ValidationFailed.on(
            "from",
            gettext("Ask for at most %(months)d months at a time.") % {"months": MAX_MONTHS},
        )
    return first, last


def _round(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def _rollup_priced(
    months: list[date], *, basis: str, tenants_filter: Q
) -> dict[tuple[date, int], dict[str, Decimal]]:
    """(month, tenant id) -> currency -> exact amount (no currency: nothing priced), from the
    daily rollup of `months`: one grouped query, the rate cards and the offerings' backends."""
    if not months:
        return {}
    days = Q()
    for month in months:
        begin, end = month_bounds(month)
        days |= Q(day__gte=begin.date(), day__lt=end.date())
    sums = (
        UsageDaily.objects.filter(days)
        .filter(tenants_filter)
        .measure_sums(["tenant_id", "day", "gpu_model_id", "offering_id"])
    )
    if not sums:
        return {}
    rates = RateBook.load()
    backends = dict(
        Offering.objects.filter(pk__in={key[3] for key in sums if key[3] is not None}).values_list(
            "pk", "backend_id"
        )
    )
    quantities: dict[tuple[date, int], dict[tuple[str, Decimal], Fraction]] = defaultdict(
        lambda: defaultdict(Fraction)
    )
    for (tenant_id, day, model_id, offering_id), measures in sums.items():
        by_rate = quantities[(day.replace(day=1), tenant_id)]  # a tenant with usage has a row
        card = rates.rate_for(model_id, backends.get(offering_id), day)
        if card is None:
            continue  # no price: no charge, as on the statement
        if basis == Basis.RESERVED:
            quantity = Fraction(measures.reserved)
        elif basis == Basis.REQUESTED:
            quantity = Fraction(measures.requested)
        else:
            quantity = Fraction(measures.used_gpu_hours)
        for resource, amount in (
            (GPU, quantity),
            (CPU, Fraction(measures.cpu_core_hours)),
            (RAM, Fraction(measures.ram_gib_hours)),
        ):
            rate = card_price(card, resource)
            if rate is not None and (amount or resource == GPU):
                by_rate[(card.currency, rate)] += amount
    amounts: dict[tuple[date, int], dict[str, Decimal]] = {}
    with localcontext() as context:
        context.prec = 50
        for key, by_rate in quantities.items():
            per_currency: dict[str, Decimal] = defaultdict(Decimal)
            for (currency, rate), quantity in by_rate.items():
                per_currency[currency] += (
                    Decimal(quantity.numerator) * rate / Decimal(quantity.denominator)
                )
            amounts[key] = dict(per_currency)
    return amounts


@dataclass
class Spend:
    months: list[date]
    closed: set[date]  # the months that are closed: their rows are final
    rows: list[SpendRow]


def spend_for(
    user: User,
    first: date,
    last: date,
    *,
    tenant_slug: str | None = None,
    cost_centre: str | None = None,
) -> Spend:
    """Per month from `first` to `last` and tenant the user may see (as their statements):
    the month's total, by month then tenant. Tenants with no usage in a month have no row.

    A bounded number of queries whatever the tenants and months: the periods, the stored
    statements of the closed months, the rollup of the open ones (with the rate cards, the
    offerings and the tenants it names). NotFound when `tenant_slug` names a tenant the user
    may not see."""
    tenants = tenants_seen(user)
    if tenant_slug is not None:
        tenants = tenants.filter(slug=tenant_slug)
        if not tenants.exists():
            raise NotFound(gettext("There is no such tenant."))
    months = months_between(first, last)
    closed = {
        period.month: period
        for period in Period.objects.filter(
            month__gte=first, month__lte=last, state=PeriodState.CLOSED
        )
    }
    rows = [
        SpendRow(
            statement.period.month,
            statement.tenant,
            statement.cost_centre,
            statement.currency,
            statement.total,
            final=True,
        )
        for statement in Statement.objects.visible_to(user)
        .filter(period__in=list(closed.values()), tenant__in=tenants)
        .select_related("period", "tenant")
    ] if closed else []  # fmt: skip
    basis = settings.PORTAL_CHARGE_BASIS
    open_months = [month for month in months if month not in closed]
    priced = _rollup_priced(open_months, basis=basis, tenants_filter=Q(tenant__in=tenants))
    named = Tenant.objects.in_bulk({tenant_id for _, tenant_id in priced}) if priced else {}
    for (month, tenant_id), per_currency in priced.items():
        tenant = named[tenant_id]
        currency, total, problem = "", Decimal("0.00"), ""
        if len(per_currency) > 1:
            problem = (
                f"The rate cards for {tenant.slug} in {month:%Y-%m} are in "
                f"{' and '.join(sorted(per_currency))}: one statement takes one currency."
            )
        elif per_currency:  # nothing priced (no rate card): no currency, no charge
            [(currency, amount)] = per_currency.items()
            total = _round(amount)
        rows.append(
            SpendRow(
                month, tenant, tenant.cost_centre, currency, total, final=False, problem=problem
            )
        )
    if cost_centre is not None:
        rows = [row for row in rows if row.cost_centre == cost_centre]
    rows.sort(key=lambda row: (row.month, row.tenant.slug))
    return Spend(months, set(closed), rows)


# The chart and its table


@dataclass
class SpendChart:
    """One currency's spend: a row per month, a column per charted tenant (the biggest
    TOP_TENANTS over the range) and one for the other tenants, as the usage charts take them."""

    currency: str
    months: list[date]
    final: dict[date, bool]
    series: list[tuple[str, str]]  # (key, label): tenants' slugs, then OTHER
    cells: dict[date, dict[str, Decimal]]

    @property
    def name(self) -> str:
        return f"spend-{self.currency}"

    def total(self, month: date) -> Decimal:
        return sum(self.cells[month].values(), Decimal("0.00"))

    def rows(self) -> list[list[str]]:
        """Month, one amount per series, the month's total and its status: the table's rows
        and the chart's data alike."""
        return [
            [
                f"{month:%Y-%m}",
                *(f"{self.cells[month].get(key, Decimal('0.00')):.2f}" for key, _ in self.series),
                f"{self.total(month):.2f}",
                gettext("final") if self.final[month] else gettext("provisional, approx."),
            ]
            for month in self.months
        ]

    @property
    def labels(self) -> list[str]:
        """The table's column headers, in the order of `rows()`."""
        return [
            gettext("Month"),
            *(label for _, label in self.series),
            gettext("Total"),
            gettext("Status"),
        ]

    def as_data(self) -> dict[str, object]:
        """What static/js/usage-charts.js draws: stacked bars per month, one series per
        tenant."""
        keys = [key for key, _ in self.series]
        return {
            "name": self.name,
            "title": f"Spend per tenant per month ({self.currency})",
            "columns": ["month", *keys, "total", "status"],
            "labels": self.labels,
            "rows": self.rows(),
            "chart": {
                "x": "month",
                "series": keys,
                "split": "",
                "kind": "stacked-bars",
                "unit": self.currency,
            },
        }


def spend_charts(spend: Spend, *, top: int = TOP_TENANTS) -> list[SpendChart]:
    """One chart per currency the rows are in (a tenant with nothing priced has none)."""
    months, closed = spend.months, spend.closed
    by_currency: dict[str, list[SpendRow]] = defaultdict(list)
    for row in spend.rows:
        if row.currency:
            by_currency[row.currency].append(row)
    charts = []
    for currency, priced in sorted(by_currency.items()):
        spent: dict[str, Decimal] = defaultdict(Decimal)
        names: dict[str, str] = {}
        for row in priced:
            spent[row.tenant.slug] += row.total
            names[row.tenant.slug] = row.tenant.name
        ranked = sorted(spent, key=lambda slug: (-spent[slug], slug))
        # "Other tenants" only when it stands for more than one.
        shown = set(ranked if len(ranked) <= top + 1 else ranked[:top])
        series = [(slug, names[slug]) for slug in ranked if slug in shown]
        if len(ranked) > len(shown):
            series.append(
                (
                    OTHER,
                    gettext("Other tenants (%(count)d)") % {"count": len(ranked) - len(shown)},
                )
            )
        cells: dict[date, dict[str, Decimal]] = {month: {} for month in months}
        for row in priced:
            key = row.tenant.slug if row.tenant.slug in shown else OTHER
            month_cells = cells.setdefault(row.month, {})
            month_cells[key] = month_cells.get(key, Decimal("0.00")) + row.total
        charts.append(
            SpendChart(
                currency, months, {month: month in closed for month in months}, series, cells
            )
        )
    return charts
