"""Spend per tenant per month over a range of months: the chart on the chargeback page and
`GET /api/v1/spend/`.

A closed month's numbers are its stored statements' totals (one query for every closed month;
the chart's sums of every tenant's are kept in the process while the months stay closed).
An open month is priced from the rollups by offering instead of pricing each tenant's hourly
records: from the monthly rollup (`UsageMonthly`) when no rate card takes effect within the
month, else from the daily one (`UsageDaily`); one grouped query each for every open month of
the range, summed there per GPU model and sharing backend (what rate cards name). Rate cards
take effect by day, so a month's (or a day's) quantity per GPU model and backend finds its card
exactly, and with it the requested CPU core-hours and memory GiB-hours their prices on that
card. Its amount is the exact price of the month's quantities, rounded once to the cent per
tenant and month; a statement rounds each of its lines (model x offering x user x workload x
card) instead, so an open month's number is *provisional, approx.*: it may differ from the
provisional statement's total by less than a cent per statement line (README, "Spend per
month").
"""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Case, F, Q, QuerySet, Sum, Value, When
from django.utils.safestring import SafeString
from django.utils.translation import get_language, gettext

from portal.accounts.models import User
from portal.billing.models import Basis, Period, PeriodState, RateCard, Statement
from portal.billing.pricing import CENT, CPU, RAM, RateBook, card_price, month_bounds
from portal.billing.selectors import month_of, statements_seen, tenants_seen
from portal.core import cells
from portal.core.bulk import plain_rows
from portal.core.errors import ValidationFailed
from portal.metering.kept import KeptReadings, usage_inputs
from portal.metering.models import MICRO, UsageDaily, UsageMonthly
from tenants.access import sees_everything
from tenants.models import Tenant

# The longest range one answer covers, and the range the page charts.
MAX_MONTHS = 24
CHART_MONTHS = 12
# The chart's series: the biggest tenants of a currency, the rest summed as "other tenants".
TOP_TENANTS = 8
OTHER = "_other"  # the other tenants' series (no tenant slug starts with "_")


@dataclass(frozen=True)
class TenantName:
    """The tenant of a spend row, as the chart and the API name it (not a model instance: a
    range of closed months is thousands of rows)."""

    pk: int
    slug: str
    name: str


@dataclass(frozen=True)
class SpendRow:
    """A tenant's total for a month: final (its stored statement) or provisional, approx.
    (priced from the usage rollups now)."""

    month: date
    tenant: TenantName
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


# Per charge basis, the rollup's columns of its quantity: a GPU-eq fraction's numerator and
# denominator, or GPU-hours as a decimal (None).
BASIS_COLUMNS: dict[str, tuple[str, str] | None] = {
    Basis.RESERVED: ("reserved_num", "reserved_den"),
    Basis.REQUESTED: ("requested_num", "requested_den"),
    Basis.USED: None,
}


def _rollup_rows(
    months: list[date], rates: RateBook, tenants_filter: Q, basis: str
) -> list[tuple[Any, ...]]:
    """(tenant id, first day, GPU model id, backend id, denominator, numerator, CPU core-hours,
    RAM GiB-hours) of `months`, summed per key and stored denominator in the database (on the
    used basis the numerator is the GPU-hours, a decimal, over 1). Only what pricing reads:
    the quantity of the basis, the CPU and the memory, by sharing backend (which rate cards
    name) rather than by offering. A month no card takes effect within is read from its
    monthly row (first day: the month's); a month with a change, from its days."""
    whole: list[date] = []
    split: list[date] = []
    for month in months:
        begin, end = month_bounds(month)
        (split if rates.changes_within(begin.date(), end.date()) else whole).append(month)
    columns = BASIS_COLUMNS[basis]
    over, summed = (
        (F(columns[1]), Sum(columns[0])) if columns else (Value(1), Sum("used_gpu_hours"))
    )
    keys = ("tenant_id", "since", "gpu_model_id", "backend")

    def grouped(rows: QuerySet[Any], since: F) -> list[tuple[Any, ...]]:
        return list(
            plain_rows(
                rows.filter(tenants_filter)
                .order_by()
                .annotate(since=since, backend=F("offering__backend_id"), over=over)
                .values(*keys, "over")
                .annotate(quantity=summed, cpu=Sum("cpu_core_hours"), ram=Sum("ram_gib_hours"))
                .values_list(*keys, "over", "quantity", "cpu", "ram")
            )
        )

    found = grouped(UsageMonthly.objects.filter(month__in=whole), F("month")) if whole else []
    if split:
        days = Q()
        for month in split:
            begin, end = month_bounds(month)
            days |= Q(day__gte=begin.date(), day__lt=end.date())
        found += grouped(UsageDaily.objects.filter(days), F("day"))
    if connection.vendor != "postgresql":
        # SQLite sums decimals with more places than it stores; PostgreSQL keeps the six.
        found = [
            (
                *row[:5],
                *(value if isinstance(value, int) else value.quantize(MICRO) for value in row[5:]),
            )
            for row in found
        ]
    return found


def _rollup_priced(
    months: list[date], *, basis: str, tenants_filter: Q
) -> dict[tuple[date, int], dict[str, Decimal]]:
    """(month, tenant id) -> currency -> exact amount (no currency: nothing priced), from the
    rollups of `months`: the rate cards, and one grouped query of the monthly rollup for the
    months no card takes effect within and one of the daily rollup for the others.

    Some 7,000 rows for a month of a thousand tenants: each finds its rate card, and adds its
    numerator to the integers kept per rate and denominator (a fraction per row would cost
    more than the rest); the quantities are made exact fractions once per tenant, month, rate
    and denominator."""
    if not months:
        return {}
    rates = RateBook.load()
    rows = _rollup_rows(months, rates, tenants_filter, basis)
    # (month, tenant) -> (currency, rate) -> denominator -> the numerators' sum
    fractions: dict[tuple[date, int], dict[tuple[str, Decimal], dict[int, int]]] = {}
    # (month, tenant) -> (currency, rate) -> decimal quantity (CPU, memory, used GPU-hours)
    decimals: dict[tuple[date, int], dict[tuple[str, Decimal], Decimal]] = {}
    gpu_decimal = BASIS_COLUMNS[basis] is None
    for tenant_id, day, model_id, backend_id, over, quantity, cpu, ram in rows:
        key = (day.replace(day=1), tenant_id)
        by_den = fractions.setdefault(key, {})  # a tenant with usage has a row
        by_decimal = decimals.setdefault(key, {})
        card = rates.rate_for(model_id, backend_id, day)
        if card is None:
            continue  # no price: no charge, as on the statement
        currency = card.currency
        rate = card.price_per_gpu_eq_hour
        if gpu_decimal:
            by_decimal[(currency, rate)] = by_decimal.get((currency, rate), Decimal(0)) + quantity
        else:
            numerators = by_den.setdefault((currency, rate), {})
            numerators[over] = numerators.get(over, 0) + int(quantity)
        for resource, amount in ((CPU, cpu), (RAM, ram)):
            price_of = card_price(card, resource)
            if price_of is not None and amount:
                rated = (currency, price_of)
                by_decimal[rated] = by_decimal.get(rated, Decimal(0)) + amount
    return _exact_amounts(fractions, decimals)


def _exact_amounts(
    fractions: dict[tuple[date, int], dict[tuple[str, Decimal], dict[int, int]]],
    decimals: dict[tuple[date, int], dict[tuple[str, Decimal], Decimal]],
) -> dict[tuple[date, int], dict[str, Decimal]]:
    """Per key and currency, the exact sum of quantity x rate: each rate's quantity an exact
    fraction (its numerators over their denominators, and its decimals), priced once."""
    amounts: dict[tuple[date, int], dict[str, Decimal]] = {}
    with localcontext() as context:
        context.prec = 50
        for key, by_den in fractions.items():
            quantities: dict[tuple[str, Decimal], Fraction] = defaultdict(Fraction)
            for rated, numerators in by_den.items():
                for over, numerator in numerators.items():
                    quantities[rated] += Fraction(numerator, over)
            for rated, amount in decimals[key].items():
                quantities[rated] += Fraction(amount)
            per_currency: dict[str, Decimal] = defaultdict(Decimal)
            for (currency, rate), quantity in quantities.items():
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


def _closed(first: date, last: date) -> dict[date, Period]:
    return {
        period.month: period
        for period in Period.objects.filter(
            month__gte=first, month__lte=last, state=PeriodState.CLOSED
        )
    }


def _statements(
    user: User,
    closed: dict[date, Period],
    tenants: QuerySet[Tenant] | None,
    cost_centre: str | None,
) -> QuerySet[Statement]:
    stored = statements_seen(user, tenants).filter(period__in=list(closed.values()))
    return stored if cost_centre is None else stored.filter(cost_centre=cost_centre)


# Every tenant's open months priced from the rollups, kept in this process until the usage, the
# rate cards, a tenant or the catalog change (portal/metering/kept.py).
_everyones_open_rows: KeptReadings[SpendRow] = KeptReadings()


def _everyones_inputs() -> tuple[object, ...]:
    """What every tenant's spend is read from (`usage_inputs`): the rollups, the rate cards
    and the tenants (their names and cost centres are on the rows). One query."""
    return usage_inputs([UsageDaily, UsageMonthly], counted=[RateCard], stamped=[Tenant])


def _open_rows(
    months: list[date],
    tenants: QuerySet[Tenant],
    cost_centre: str | None,
    *,
    everyone: bool,
    inputs: tuple[object, ...] | None = None,
) -> list[SpendRow]:
    """The open months' rows, priced from the usage rollups. Every tenant's (`everyone`:
    `tenants` is every tenant) are kept until the usage, the rate cards, a tenant (its name and
    cost centre are on the rows) or the catalog change: one query then (`inputs`, when the
    caller read them), where pricing a month of a thousand tenants reads some 7,000 rollup
    rows."""
    if everyone and months:
        key = (tuple(months), settings.PORTAL_CHARGE_BASIS, inputs or _everyones_inputs())
        rows = _everyones_open_rows.read(key, lambda: _priced_rows(months, tenants))
    else:
        rows = _priced_rows(months, tenants)
    if cost_centre is not None:
        rows = [row for row in rows if row.cost_centre == cost_centre]
    return rows


def _priced_rows(months: list[date], tenants: QuerySet[Tenant]) -> list[SpendRow]:
    """`tenants`' rows of the open `months`, priced from the usage rollups."""
    priced = _rollup_priced(
        months, basis=settings.PORTAL_CHARGE_BASIS, tenants_filter=Q(tenant__in=tenants)
    )
    named = {
        pk: (TenantName(pk, slug, name), centre)
        for pk, slug, name, centre in Tenant.objects.filter(
            pk__in={tenant_id for _, tenant_id in priced}
        ).values_list("pk", "slug", "name", "cost_centre")
    } if priced else {}  # fmt: skip
    rows = []
    for (month, tenant_id), per_currency in priced.items():
        tenant, centre = named[tenant_id]
        currency, total, problem = "", Decimal("0.00"), ""
        if len(per_currency) > 1:
            problem = (
                f"The rate cards for {tenant.slug} in {month:%Y-%m} are in "
                f"{' and '.join(sorted(per_currency))}: one statement takes one currency."
            )
        elif per_currency:  # nothing priced (no rate card): no currency, no charge
            [(currency, amount)] = per_currency.items()
            total = _round(amount)
        rows.append(SpendRow(month, tenant, centre, currency, total, final=False, problem=problem))
    return rows


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
    statements of the closed months, the rollups of the open ones (with the rate cards and the
    tenants they name). NotFound when `tenant_slug` names a tenant the user
    may not see."""
    tenants = tenants_seen(user, tenant_slug)
    months = months_between(first, last)
    closed = _closed(first, last)
    rows = []
    if closed:
        # Plain values, not model instances: twelve closed months of a thousand tenants.
        narrowed = None if tenant_slug is None else tenants
        stored = _statements(user, closed, narrowed, cost_centre).values_list(
            "period__month", "tenant_id", "tenant__slug", "tenant__name", "cost_centre",
            "currency", "total",
        )  # fmt: skip
        names: dict[int, TenantName] = {}
        for month, tenant_id, slug, name, centre, currency, total in stored:
            tenant = names.get(tenant_id)
            if tenant is None:
                tenant = names[tenant_id] = TenantName(tenant_id, slug, name)
            rows.append(SpendRow(month, tenant, centre, currency, total, final=True))
    opened = [month for month in months if month not in closed]
    everyone = tenant_slug is None and sees_everything(user)
    rows += _open_rows(opened, tenants, cost_centre, everyone=everyone)
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

    def rows_html(self) -> SafeString:
        """`rows()` as the table's `<tr>`s: the month a row header, the amounts numbers, the
        status text (see `portal.core.cells`)."""
        return cells.rows(self.rows(), partial(_spend_row, cells.text(self.currency)))

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


def _spend_row(currency: str, row: list[str]) -> str:
    first, *amounts, status = row
    numbers = "".join([f'<td class="number">{cells.text(amount)}</td>' for amount in amounts])
    return (
        f'<tr data-testid="spend-{currency}-{cells.text(first)}"><th scope="row">'
        f"{cells.text(first)}</th>{numbers}<td>{cells.text(status)}</td></tr>"
    )


def _ranked(spent: dict[TenantName, Decimal], top: int) -> tuple[list[TenantName], int]:
    """The tenants a chart names, biggest spend first, and how many others it sums ("Other
    tenants" only when it stands for more than one)."""
    ranked = sorted(spent, key=lambda tenant: (-spent[tenant], tenant.slug))
    shown = ranked if len(ranked) <= top + 1 else ranked[:top]
    return shown, len(ranked) - len(shown)


def _chart(
    currency: str,
    spend: Spend,
    shown: list[TenantName],
    others: int,
) -> SpendChart:
    """The chart of `spend`'s rows in `currency`: the `shown` tenants' own columns, every
    other tenant's amount (a row of OTHER's too) in the others' column."""
    slugs = {tenant.slug for tenant in shown}
    series = [(tenant.slug, tenant.name) for tenant in shown]
    if others:
        series.append((OTHER, gettext("Other tenants (%(count)d)") % {"count": others}))
    cells: dict[date, dict[str, Decimal]] = {month: {} for month in spend.months}
    for row in spend.rows:
        if row.currency != currency:
            continue
        key = row.tenant.slug if row.tenant.slug in slugs else OTHER
        month_cells = cells.setdefault(row.month, {})
        month_cells[key] = month_cells.get(key, Decimal("0.00")) + row.total
    final = {month: month in spend.closed for month in spend.months}
    return SpendChart(currency, spend.months, final, series, cells)


def spend_charts(spend: Spend, *, top: int = TOP_TENANTS) -> list[SpendChart]:
    """One chart per currency the rows are in (a tenant with nothing priced has none)."""
    spent: dict[str, dict[TenantName, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in spend.rows:
        if row.currency:
            spent[row.currency][row.tenant] += row.total
    return [
        _chart(currency, spend, *_ranked(by_tenant, top))
        for currency, by_tenant in sorted(spent.items())
    ]


# Every tenant's spend charts (`spend_charts_for` as finance and admins read it), kept whole
# in this process under the same key as their parts below, and the reader's language (the
# charts' labels are in it); at most `KEEP_SECONDS`.
_everyones_charts: KeptReadings[tuple[list[SpendChart], list[SpendRow]]] = KeptReadings()

# The rows of the others' column of a chart summed in the database.
OTHERS = TenantName(0, OTHER, "")

# Every tenant's closed months summed from their stored statements (the chart's two grouped
# reads of twelve thousand statements), kept in this process while the same months stay closed
# and what the open months are read from does not change (`_everyones_inputs`, the tenants'
# latest change among them: their names are read with the sums). A month's statements are
# written once, when it closes; reopening it deletes them, and closing it again stamps a new
# `closed_at`. At most `KEEP_SECONDS` (portal/metering/kept.py), like the open months' rows.
_everyones_closed_sums: KeptReadings[tuple[Any, ...]] = KeptReadings()


def _kept_sums(
    closed_key: tuple[object, ...] | None, question: object, reading: Callable[[], list[Any]]
) -> list[tuple[Any, ...]]:
    """`reading()`'s rows, kept under `closed_key` and `question` when there is a key (the
    reader sees every tenant's statements)."""
    if closed_key is None:
        return [tuple(row) for row in reading()]
    return _everyones_closed_sums.read(
        (closed_key, question), lambda: [tuple(row) for row in reading()]
    )


def spend_charts_for(
    user: User, first: date, last: date, *, cost_centre: str | None = None, top: int = TOP_TENANTS
) -> tuple[list[SpendChart], list[SpendRow]]:
    """`spend_charts(spend_for(...))` with the closed months summed in the database: each
    tenant's spend over the range, then per month the charted tenants' totals and the others'
    sum (some hundred rows, where twelve closed months of a thousand tenants are twelve
    thousand statements). With the open months' rows that could not be priced."""
    closed = _closed(first, last)
    if not sees_everything(user):
        return _charts_read(
            user, first, last, closed=closed, cost_centre=cost_centre, top=top, inputs=None
        )
    # Every tenant's charts are the same for every reader who sees them all, in a language,
    # until the months' periods or what they are read from change: kept whole.
    inputs = _everyones_inputs()
    periods = tuple(sorted((period.pk, period.closed_at) for period in closed.values()))
    key = (first, last, cost_centre, top, periods, inputs, get_language())
    [charts] = _everyones_charts.read(
        key,
        lambda: [
            _charts_read(
                user, first, last, closed=closed, cost_centre=cost_centre, top=top, inputs=inputs
            )
        ],
    )
    return charts


def _charts_read(
    user: User,
    first: date,
    last: date,
    *,
    closed: dict[date, Period],
    cost_centre: str | None,
    top: int,
    inputs: tuple[object, ...] | None,
) -> tuple[list[SpendChart], list[SpendRow]]:
    """`spend_charts_for`, read: `inputs` are every tenant's (`_everyones_inputs`) when the
    user sees them all, else None."""
    tenants = tenants_seen(user)
    months = months_between(first, last)
    opened = [month for month in months if month not in closed]
    everyone = inputs is not None
    open_rows = _open_rows(opened, tenants, cost_centre, everyone=everyone, inputs=inputs)
    spent: dict[str, dict[TenantName, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in open_rows:
        if row.currency:
            spent[row.currency][row.tenant] += row.total
    stored = _statements(user, closed, None, cost_centre).exclude(currency="").order_by()
    closed_key = None
    if closed and inputs is not None:
        periods = tuple(sorted((period.pk, period.closed_at) for period in closed.values()))
        closed_key = (periods, cost_centre, inputs)
    if closed:
        per_tenant = stored.values_list("currency", "tenant_id", "tenant__slug", "tenant__name")
        totals = _kept_sums(closed_key, "tenants", lambda: list(per_tenant.annotate(Sum("total"))))
        for currency, pk, slug, name, total in totals:
            spent[currency][TenantName(pk, slug, name)] += total
    ranked = {currency: _ranked(by_tenant, top) for currency, by_tenant in spent.items()}
    rows = list(open_rows)
    if closed and ranked:
        named = Q()
        for currency, (shown, _others) in ranked.items():
            named |= Q(currency=currency, tenant_id__in=[tenant.pk for tenant in shown])
        tenants_by_pk = {tenant.pk: tenant for shown, _ in ranked.values() for tenant in shown}
        # Grouped by the period's id, not its month: no join to the periods for 12,000 rows.
        months_by_period = {period.pk: month for month, period in closed.items()}
        summed = (
            stored.annotate(key=Case(When(named, then=F("tenant_id")), default=Value(0)))
            .values_list("period_id", "currency", "key")
            .annotate(Sum("total"))
        )
        shown_key = tuple(
            (currency, tuple(tenant.pk for tenant in shown))
            for currency, (shown, _others) in sorted(ranked.items())
        )
        charted = _kept_sums(closed_key, shown_key, lambda: list(summed))
        for period_id, currency, key, total in charted:
            tenant = tenants_by_pk.get(key, OTHERS)
            month = months_by_period[period_id]
            rows.append(SpendRow(month, tenant, "", currency, total, final=True))
    spend = Spend(months, set(closed), rows)
    charts = [_chart(currency, spend, *ranked[currency]) for currency in sorted(ranked)]
    return charts, [row for row in open_rows if row.problem]
