"""Pricing: a tenant's month of usage into statement lines, exactly.

The usage is read from the per-workload daily rollup (`UsageWorkloadDaily`), which sums the
hourly records exactly and is rewritten with them: a month of a thousand tenants is some
65,000 rollup rows where it is 700,000 records.

A line is GPU model x offering x user x workload x rate card. Its quantity is the sum of the
charge basis over the month's hours (reserved or requested GPU-eq-hours, exact fractions; or
used GPU-hours), split by the rate card in effect on each day (a price that changes mid-month
gives two lines). Its amount is quantity x rate rounded once, half up, to the cent; a
statement's total is the sum of its rounded lines. Usage with no rate card (a model nobody
priced, or usage of no known model) is listed at no charge, with no rate. Where the rate card
of a GPU line prices CPU core-hours or memory GiB-hours, the line's pods' requested CPU and
memory (whatever the basis: they are always requests) give one more line each, with the same
GPU model, offering, user, workload and card, their own unit and the card's price for it. With
PORTAL_CHARGE_UNRESERVED on, a line per GPU model (and rate card) shares out the capacity nobody
reserved (unreserved.py).
"""

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from fractions import Fraction
from functools import cached_property
from typing import Any

from django.db.models import Case, DateField, F, QuerySet, Value, When
from django.utils.translation import gettext

from portal.allocations.models import GpuRequest
from portal.allocations.selectors import PriceQuote
from portal.billing.models import Basis, RateCard, basis_quantity
from portal.billing.unreserved import unreserved_capacity
from portal.catalog.cache import catalog_kept, offerings_by_id
from portal.catalog.models import Offering
from portal.core.errors import Conflict
from portal.metering.models import UsageModelMonthly, UsageWorkloadDaily
from tenants.models import Tenant

CENT = Decimal("0.01")
UNITS = {
    Basis.RESERVED: "GPU-eq-hour",
    Basis.REQUESTED: "GPU-eq-hour",
    Basis.USED: "GPU-hour",
}
# What a line charges for: the GPU quantity of the basis, or the CPU or memory its pods requested.
GPU, CPU, RAM = "gpu", "cpu", "ram"
COMPUTE_UNITS = {CPU: "CPU core-hour", RAM: "memory GiB-hour"}


def card_price(card: RateCard, resource: str) -> Decimal | None:
    """`card`'s price per unit of `resource` (None: the card does not charge for it)."""
    if resource == CPU:
        return card.price_per_cpu_core_hour
    if resource == RAM:
        return card.price_per_ram_gib_hour
    return card.price_per_gpu_eq_hour


def current_month() -> date:
    """The first day of this month (UTC)."""
    return datetime.now(UTC).date().replace(day=1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """The first instant of `month` and of the month after, in UTC."""
    first = month.replace(day=1)
    following = date(first.year + first.month // 12, first.month % 12 + 1, 1)
    return (
        datetime.combine(first, time(), tzinfo=UTC),
        datetime.combine(following, time(), tzinfo=UTC),
    )


def price(quantity: Fraction, rate: Decimal) -> Decimal:
    """quantity x rate, rounded once, half up (away from zero), to the cent: in integers, so
    exactly whatever the digits (a month's close prices some 40,000 lines)."""
    rate_numerator, rate_denominator = rate.as_integer_ratio()
    hundredths = quantity.numerator * rate_numerator * 100
    over = quantity.denominator * rate_denominator
    cents = (2 * abs(hundredths) + over) // (2 * over)
    return Decimal(-cents if hundredths < 0 else cents).scaleb(-2)


def _effective_from(card: RateCard) -> date:
    return card.effective_from


class RateBook:
    """Which rate card applies to a (GPU model, sharing backend) on a day: the newest card in
    effect, one for that backend before one for every backend."""

    def __init__(self, cards: list[RateCard]) -> None:
        self.cards: dict[tuple[int, int | None], list[RateCard]] = defaultdict(list)
        for card in sorted(cards, key=lambda card: (card.effective_from, card.pk)):
            self.cards[(card.gpu_model_id, card.backend_id)].append(card)

    @classmethod
    def load(cls) -> "RateBook":
        return cls(list(RateCard.objects.all()))

    def _in_effect(self, key: tuple[int, int | None], day: date) -> RateCard | None:
        cards = self.cards.get(key, [])
        index = bisect_right(cards, day, key=_effective_from)
        return cards[index - 1] if index else None

    def changes_within(self, begin: date, end: date) -> list[date]:
        """The days after `begin` and before `end` on which a card takes effect: within each
        stretch between them every (GPU model, backend) has one card."""
        return sorted(
            {
                card.effective_from
                for cards in self.cards.values()
                for card in cards
                if begin < card.effective_from < end
            }
        )

    def rate_for(
        self, gpu_model_id: int | None, backend_id: int | None, day: date
    ) -> RateCard | None:
        if gpu_model_id is None:
            return None
        specific = self._in_effect((gpu_model_id, backend_id), day) if backend_id else None
        return specific or self._in_effect((gpu_model_id, None), day)


@dataclass
class Line:
    gpu_model: str
    offering: str
    user: str
    workload: str
    rate_card: RateCard | None
    quantity: Fraction = Fraction(0)
    used_gpu_hours: Decimal = Decimal(0)
    # The quantity by day (UTC), for the budget's burn-down.
    days: dict[date, Fraction] = field(default_factory=dict)
    resource: str = GPU  # GPU, CPU or RAM
    unit: str = ""  # empty: the basis's unit (Priced fills it in)

    @property
    def rate(self) -> Decimal | None:
        return card_price(self.rate_card, self.resource) if self.rate_card else None

    @property
    def currency(self) -> str:
        return self.rate_card.currency if self.rate_card else ""

    @cached_property
    def amount(self) -> Decimal:
        """quantity x rate, rounded: read once the line is complete (as `Priced` holds it)."""
        rate = self.rate
        return price(self.quantity, rate) if rate is not None else Decimal("0.00")


@dataclass
class Priced:
    """A tenant's month, priced: its lines, currency and total."""

    tenant: Tenant
    month: date
    basis: str
    lines: list[Line]

    def __post_init__(self) -> None:
        unit = self.unit
        for line in self.lines:
            line.unit = line.unit or unit

    @property
    def unit(self) -> str:
        """The unit of the GPU lines (the charge basis's); CPU and memory lines have theirs."""
        return UNITS[Basis(self.basis)]

    @property
    def currency(self) -> str:
        currencies = {line.currency for line in self.lines if line.currency}
        return currencies.pop() if currencies else ""

    @cached_property
    def total(self) -> Decimal:
        return sum((line.amount for line in self.lines), Decimal("0.00"))


def tenants_with_usage(month: date, tenants: QuerySet[Tenant] | None = None) -> QuerySet[Tenant]:
    """The tenants (of `tenants`, default all) with usage records in `month`, by slug: the
    tenants a month has statements for. Read from the monthly rollup by GPU model, which has a
    row for every tenant, month and GPU model with records (some 2,000 rows for a thousand
    tenants' month, where the daily rollup has 26,000)."""
    with_usage = (
        UsageModelMonthly.objects.filter(month=month.replace(day=1), tenant__isnull=False)
        .order_by()
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    if tenants is not None:
        with_usage = with_usage.filter(tenant__in=tenants)
    return Tenant.objects.filter(pk__in=with_usage).order_by("slug")


def tenant_month_priced(
    tenant: Tenant, month: date, *, basis: str, rates: RateBook | None = None, daily: bool = False
) -> Priced:
    """Price `tenant`'s usage in `month` on `basis`: `month_priced` for one tenant.

    Raises Conflict when the month's rate cards are in more than one currency.
    """
    priced = month_priced([tenant], month, basis=basis, rates=rates, daily=daily)[tenant.pk]
    problem = currency_problem(priced)
    if problem:
        raise Conflict(problem)
    return priced


def currency_problem(priced: Priced) -> str:
    """Why `priced` cannot be one statement (its rate cards are in more than one currency);
    empty when it can."""
    return currencies_problem(priced.tenant, priced.month, line_currencies(priced))


def line_currencies(priced: Priced) -> set[str]:
    """The currencies of `priced`'s lines (more than one: it cannot be one statement)."""
    return {line.currency for line in priced.lines if line.currency}


def currencies_problem(tenant: Tenant, month: date, currencies: set[str]) -> str:
    """Why a statement of `tenant` in `month` whose lines are in `currencies` cannot be priced;
    empty when it can (one currency or none)."""
    if len(currencies) <= 1:
        return ""
    return gettext(
        "The rate cards for %(tenant)s in %(month)s are in %(currencies)s: one statement "
        "takes one currency."
    ) % {
        "tenant": tenant.slug,
        "month": f"{month:%Y-%m}",
        # Translators: joins currency codes, as in "EUR and USD".
        "currencies": gettext(" and ").join(sorted(currencies)),
    }


def _stretches(begin: date, changes: list[date]) -> Case:
    """SQL: the day each rollup row's stretch of the month begins (`begin`, or the last of
    `changes` on or before the row's day)."""
    return Case(
        *(When(day__gte=day, then=Value(day)) for day in reversed(changes)),
        default=Value(begin),
        output_field=DateField(),
    )


def month_priced(
    tenants: Iterable[Tenant],
    month: date,
    *,
    basis: str,
    rates: RateBook | None = None,
    daily: bool = False,
) -> dict[int, Priced]:
    """Price every one of `tenants`' usage in `month` on `basis`, by tenant id (a tenant with
    no usage has no lines). One grouped query for the usage of all of them, one for the
    offerings' backends, and the rate cards unless `rates` is given: the number of queries does
    not grow with the tenants.

    The rollup's days are grouped per stretch of the month with the same rate cards (the
    whole month unless a card takes effect within it), or kept apart with `daily` (each
    line's `days`, for a budget's burn-down).

    Never raises for mixed currencies: `currency_problem` tells, tenant by tenant.
    """
    by_id = {tenant.pk: tenant for tenant in tenants}
    if not by_id:
        return {}
    rates = rates or RateBook.load()
    begin, end = month_bounds(month)
    first, following = begin.date(), end.date()
    rows = UsageWorkloadDaily.objects.filter(
        tenant__in=list(by_id), day__gte=first, day__lt=following
    ).annotate(
        since=F("day") if daily else _stretches(first, rates.changes_within(first, following))
    )
    # Grouped by the offering's id, not its name (a narrower sort key); its name comes with
    # its backend.
    sums = rows.measure_sums(
        [
            "tenant_id",
            "gpu_model_id",
            "gpu_model__name",
            "offering_id",
            "user__username",
            "workload",
            "since",
        ]
    )
    offerings = {
        pk: (name, backend_id)
        for pk, name, backend_id in Offering.objects.filter(
            pk__in={key[3] for key in sums} - {None}
        )
        .order_by()
        .values_list("pk", "name", "backend_id")
    }
    named = [
        (
            (
                tenant_id,
                model_id,
                model,
                offering_id,
                offerings[offering_id][0] if offering_id is not None else None,
                user,
                workload,
                since,
            ),
            measures,
        )
        for (
            tenant_id,
            model_id,
            model,
            offering_id,
            user,
            workload,
            since,
        ), measures in sums.items()
    ]
    per_tenant: dict[int, dict[tuple[Any, ...], Line]] = {pk: {} for pk in by_id}
    # The same order as one tenant priced alone: lines keep their positions.
    for (tenant_id, *key), measures in sorted(
        named, key=lambda item: (item[0][0], *map(str, item[0][1:]))
    ):
        model_id, model, offering_id, offering, user, workload, day = key
        backend_id = offerings[offering_id][1] if offering_id is not None else None
        card = rates.rate_for(model_id, backend_id, day)
        lines = per_tenant[tenant_id]
        line_key = (model or "", offering or "", user or "", workload, card.pk if card else None)
        quantity = basis_quantity(measures, basis)
        line = lines.get(line_key)
        if line is None:
            line = lines[line_key] = Line(
                model or "", offering or "", user or "", workload, card, quantity
            )
        else:
            line.quantity += quantity
        if daily:
            line.days[day] = line.days.get(day, Fraction(0)) + quantity
        line.used_gpu_hours += measures.used_gpu_hours
        if card is None:
            continue
        for resource, requested in ((CPU, measures.cpu_core_hours), (RAM, measures.ram_gib_hours)):
            if not requested or card_price(card, resource) is None:
                continue
            extra_key = (*line_key, resource)
            extra = lines.get(extra_key)
            if extra is None:
                extra = lines[extra_key] = Line(
                    *line_key[:4], card, resource=resource, unit=COMPUTE_UNITS[resource]
                )
            extra.quantity += Fraction(requested)
            if daily:
                extra.days[day] = extra.days.get(day, Fraction(0)) + Fraction(requested)
    # The optional share of the capacity nobody reserved (PORTAL_CHARGE_UNRESERVED): one
    # grouped reading for the month, shared out tenant by tenant.
    shares = unreserved_capacity(begin, end, basis=basis, rates=rates)
    for pk, lines in per_tenant.items():
        for share in shares.of(pk):
            card_pk = share.rate_card.pk if share.rate_card else None
            line = Line(share.gpu_model, "", "", share.workload, share.rate_card, share.quantity)
            lines[(line.gpu_model, "", "", line.workload, card_pk)] = line
    return {
        pk: Priced(by_id[pk], month, basis, [line for line in lines.values() if line.quantity])
        for pk, lines in per_tenant.items()
    }


def kept_rate_book() -> RateBook:
    """Every rate card, kept in the process with the catalog's rows (`catalog_kept`: a rate
    card's save or delete moves the catalog's version, `catalog_follows`), for what the lists
    and forms estimate: each list of allocations and each request form read them again. The
    statements are priced from the database's cards (`RateBook.load`)."""
    return catalog_kept("rate-book", RateBook.load)


def price_quote(offering: Offering, gpu_eq: Fraction, hours: int) -> PriceQuote | None:
    """`gpu_eq` GPU-eq of `offering` at today's rate card: per hour and for `hours` hours."""
    today = datetime.now(UTC).date()
    card = kept_rate_book().rate_for(offering.gpu_model_id, offering.backend_id, today)
    if card is None:
        return None
    rate = card.price_per_gpu_eq_hour
    return PriceQuote(
        currency=card.currency,
        per_hour=price(gpu_eq, rate),
        total=price(gpu_eq * hours, rate),
        hours=hours,
    )


def allocation_costs(allocations: list[GpuRequest]) -> dict[int, str]:
    """Each allocation's cost so far (all of it once ended): the GPU-eq-hours it reserved,
    from its start to now or its end, at the rate card in effect when it started. An estimate
    for the lists; statements are priced hour by hour from the usage records."""
    now = datetime.now(UTC)
    spans = {
        a.pk: (a.starts_at, a.ends_at)
        for a in allocations
        if a.starts_at is not None and a.ends_at is not None
    }
    if not spans:
        return {}
    started = [a for a in allocations if a.pk in spans]
    rates = kept_rate_book()
    offerings = offerings_by_id({a.offering_id for a in started})
    backends = {pk: offering.backend_id for pk, offering in offerings.items()}
    costs = {}
    for allocation in started:
        starts, ends = spans[allocation.pk]
        backend = backends.get(allocation.offering_id)
        card = rates.rate_for(allocation.gpu_model_id, backend, starts.date())
        if card is None:
            continue
        seconds = max(int((min(now, ends) - starts).total_seconds()), 0)
        amount = price(Fraction(seconds, 3600) * allocation.gpu_eq, card.price_per_gpu_eq_hour)
        costs[allocation.pk] = f"{amount} {card.currency}"
    return costs
