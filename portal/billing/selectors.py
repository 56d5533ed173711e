"""Reading chargeback: a month's statements for what a user may see, final (stored when the
month was closed) or provisional (priced from the usage records now), in one shape.

A statement is named `<YYYY-MM>-<tenant slug>` in pages and the API, final or not.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import Case, Count, F, Q, QuerySet, Sum, TextField, Value, When
from django.utils.functional import cached_property
from django.utils.translation import get_language, gettext

from portal.accounts.models import User
from portal.billing.models import (
    Basis,
    OpenMonthTotal,
    Period,
    PeriodState,
    RateCard,
    Statement,
    StatementLine,
)
from portal.billing.pricing import (
    UNITS,
    Priced,
    current_month,
    price,
    tenant_month_priced,
    tenants_with_usage,
)
from portal.billing.provisional import (
    ProvisionalTotal,
    open_month_totals,
    priced_from,
    provisional_totals,
    stored_total,
)
from portal.billing.unreserved import WORKLOADS
from portal.core.errors import NotFound, ValidationFailed
from portal.core.models import AuditEvent
from portal.metering.kept import KeptReadings
from tenants.access import sees_everything, tenants_led_by
from tenants.models import Tenant

# The units of GPU lines, and the workloads of the lines that share out unused capacity.
GPU_UNITS = frozenset(UNITS.values())
SHARE_WORKLOADS = frozenset(WORKLOADS.values())
# A statement's CSV and XLSX, in the API and on its page alike (README, "Statement CSV columns").
LINE_NUMBER_FORMATS = {"quantity": "0.000000", "rate": "0.0000", "amount": "0.00"}
LINE_COLUMNS = (
    "period", "tenant", "cost_centre", "gpu_model", "offering", "user", "workload", "quantity",
    "unit", "rate", "currency", "amount", "basis", "status",
)  # fmt: skip
# How each of LINE_COLUMNS is made of `final_statement_cells` (core's csv_query_download).
LINE_CELLS = (
    ("text", "period"), ("text", "tenant_slug"), ("text", "centre"), ("text", "gpu_model"),
    ("text", "offering"), ("text", "user"), ("text", "workload"),
    ("fraction", "quantity_num", "quantity_den"), ("text", "unit"), ("number", "rate"),
    ("text", "currency"), ("number", "amount"), ("text", "line_basis"), ("text", "status"),
)  # fmt: skip
STATEMENT_ID = re.compile(r"^(\d{4})-(\d{2})-([a-z0-9][a-z0-9-]{0,62})$")
MONTH = re.compile(r"^(\d{4})-(\d{2})$")
HISTORY_CLOSE, HISTORY_REOPEN = "period.close", "period.reopen"


# Months chargeback knows: from 2000 to ten years ahead (months further on have no usage, and
# year 9999's month end would be past what a date holds).
FIRST_YEAR, YEARS_AHEAD = 2000, 10


def _known_month(year: int, month: int) -> bool:
    return 1 <= month <= 12 and FIRST_YEAR <= year <= current_month().year + YEARS_AHEAD


def month_of(text: str, *, field: str = "period") -> date:
    """The first day of the month `YYYY-MM`; ValidationFailed naming `field` otherwise."""
    match = MONTH.match(text.strip()) if isinstance(text, str) else None
    if match is None or not 1 <= int(match.group(2)) <= 12:
        raise ValidationFailed.on(field, gettext("Give a month as YYYY-MM, e.g. 2026-10."))
    if not _known_month(int(match.group(1)), int(match.group(2))):
        last = current_month().year + YEARS_AHEAD
        raise ValidationFailed.on(
            field,
            gettext("Give a month from %(first)s to %(last)s.")
            % {"first": f"{FIRST_YEAR}-01", "last": f"{last}-12"},
        )
    return date(int(match.group(1)), int(match.group(2)), 1)


@dataclass(frozen=True)
class LineView:
    gpu_model: str
    offering: str
    user: str
    workload: str
    quantity: Fraction
    unit: str
    rate: Decimal | None
    currency: str
    amount: Decimal
    used_gpu_hours: Decimal

    @property
    def holds_gpus(self) -> bool:
        """A line of GPU time a workload held: not CPU or memory, not the share of unreserved
        capacity (which no workload used)."""
        return self.unit in GPU_UNITS and self.workload not in SHARE_WORKLOADS

    @property
    def utilisation(self) -> Decimal | None:
        """Used GPU-hours over the line's quantity (1 = all of it used), to three places; None
        for lines that hold no GPU or have no quantity."""
        if not self.holds_gpus or not self.quantity:
            return None
        used = Fraction(self.used_gpu_hours) / self.quantity
        return (Decimal(used.numerator) / Decimal(used.denominator)).quantize(
            Decimal("0.001"), rounding=ROUND_HALF_UP
        )

    @property
    def idle_cost(self) -> Decimal | None:
        """What was paid for and not used: the quantity beyond the used GPU-hours at the line's
        rate, rounded once to the cent; None for lines that hold no GPU or have no rate."""
        if not self.holds_gpus or self.rate is None:
            return None
        return price(max(self.quantity - Fraction(self.used_gpu_hours), Fraction(0)), self.rate)


@dataclass
class StatementView:
    month: date
    tenant: Tenant
    cost_centre: str
    currency: str
    basis: str
    total: Decimal
    stored: Statement | None = None  # the frozen statement of a closed month
    problem: str = ""  # why it cannot be priced (e.g. rate cards in two currencies)
    budget_used: str = ""  # on the month's page: the share of its budget, "84.2%"

    @property
    def final(self) -> bool:
        return self.stored is not None

    @property
    def provisional(self) -> bool:
        return self.stored is None

    @property
    def id(self) -> str:
        return f"{self.month:%Y-%m}-{self.tenant.slug}"

    @property
    def unit(self) -> str:
        return UNITS[Basis(self.basis)]

    @property
    def basis_label(self) -> str:
        """The charge basis as people read it, in their language (e.g. "reserved
        GPU-eq-hours")."""
        return str(Basis(self.basis).label)


def _final(month: date, row: Statement) -> StatementView:
    return StatementView(
        month, row.tenant, row.cost_centre, row.currency, row.basis, row.total, stored=row
    )


def _provisional(month: date, tenant: Tenant, priced: Priced) -> StatementView:
    return StatementView(
        month, tenant, tenant.cost_centre, priced.currency, priced.basis, priced.total
    )


def _unpriceable(month: date, tenant: Tenant, problem: str) -> StatementView:
    basis = settings.PORTAL_CHARGE_BASIS
    return StatementView(
        month, tenant, tenant.cost_centre, "", basis, Decimal("0.00"), problem=problem
    )


def _open_view(month: date, tenant: Tenant, basis: str, total: ProvisionalTotal) -> StatementView:
    """A tenant's provisional statement of an open month from its total, or, when its rate
    cards mix currencies, one that says why (the other tenants' are priced)."""
    if total.problem:
        return _unpriceable(month, tenant, total.problem)
    return StatementView(month, tenant, tenant.cost_centre, total.currency, basis, total.total)


def _period(month: date) -> Period | None:
    return Period.objects.filter(month=month).first()


def tenants_seen(user: User, tenant_slug: str | None = None) -> QuerySet[Tenant]:
    """Finance and admins see every tenant's statements; leads their tenants'; others none.
    `tenant_slug` narrows them to that tenant; NotFound when the user may not see it."""
    tenants = Tenant.objects.all() if sees_everything(user) else tenants_led_by(user)
    if tenant_slug is not None:
        tenants = tenants.filter(slug=tenant_slug)
        if not tenants.exists():
            raise NotFound(gettext("There is no such tenant."))
    return tenants


def statements_seen(user: User, tenants: QuerySet[Tenant] | None = None) -> QuerySet[Statement]:
    """The stored statements of `tenants` (from `tenants_seen`), or of every tenant whose
    statements the user sees: for finance and admins, with no filter on tenants at all."""
    stored = Statement.objects.visible_to(user)
    if tenants is None:
        if sees_everything(user):
            return stored
        tenants = tenants_seen(user)
    return stored.filter(tenant__in=tenants)


def statements_for(
    user: User, month: date, *, tenant_slug: str | None = None
) -> list[StatementView]:
    """The month's statements the user may see, by tenant: stored ones for a closed month,
    provisional ones (priced now) for an open month, for tenants with usage in it.

    `tenant_slug` narrows them to one tenant (priced alone); NotFound when the user may not see
    that tenant's statements."""
    return _month_views(user, month, _period(month), tenant_slug)


def _month_views(
    user: User, month: date, period: Period | None, tenant_slug: str | None
) -> list[StatementView]:
    tenants = tenants_seen(user, tenant_slug)
    if period is not None and period.state == PeriodState.CLOSED:
        narrowed = None if tenant_slug is None else tenants
        stored = statements_seen(user, narrowed).filter(period=period).select_related("tenant")
        return [_final(month, row) for row in stored.order_by("tenant__slug")]
    listed = list(tenants_with_usage(month, tenants))
    basis = settings.PORTAL_CHARGE_BASIS
    totals = provisional_totals(listed, month, basis=basis)  # stored, or priced all at once
    return [_open_view(month, tenant, basis, totals[tenant.pk]) for tenant in listed]


# How a month's statements sort (`-` first for descending): a column, then the tenant.
STATEMENT_SORTS = {
    "tenant": ("tenant__slug",),
    "cost_centre": ("cost_centre", "tenant__slug"),
    "total": ("total", "tenant__slug"),
}


@dataclass(frozen=True)
class CentreTotal:
    """The statements of one cost centre in one currency (none: nothing priced)."""

    cost_centre: str
    currency: str
    total: Decimal
    statements: int


class MonthStatements:
    """A month's statements the user may see (as `statements_for`), sorted and narrowed to a
    cost centre, as a list that pages slice, read from the database a page at a time: sorted,
    counted and totalled there (a thousand tenants' statements are never loaded to show
    fifty). A closed month's are its stored statements; an open month's its provisional totals
    (`provisional.open_month_totals`: stored once priced, every one current before it is read).

    `tenant_slug` narrows them to one tenant; NotFound when the user may not see it."""

    def __init__(
        self,
        user: User,
        month: date,
        *,
        tenant_slug: str | None = None,
        cost_centre: str | None = None,
        sort: str = "tenant",
    ) -> None:
        column = sort.removeprefix("-")
        if column not in STATEMENT_SORTS:
            raise ValidationFailed.on("sort", gettext("Sort by tenant, cost_centre or total."))
        self.month, self.descending = month, sort.startswith("-")
        self._order = STATEMENT_SORTS[column]
        self.period = period = _period(month)
        self.open = period is None or period.state != PeriodState.CLOSED
        self._user, self.cost_centre = user, cost_centre
        everyone = tenant_slug is None and sees_everything(user)
        self._tenants = None if everyone else tenants_seen(user, tenant_slug)
        # A closed month's statements are narrowed to tenants only when one is asked for.
        self._narrowed = None if tenant_slug is None else self._tenants
        self.basis = settings.PORTAL_CHARGE_BASIS if self.open else ""
        # Every tenant's statements (finance's, admins'): a closed month's totals per cost
        # centre are the same until the month is reopened (which deletes them) and closed
        # again (a new `closed_at`); an open month's totals and pages until what they are
        # priced from changes (`_open_inputs`). So they are kept by those.
        self._kept_as: tuple[object, ...] | None = None
        if everyone and not self.open and period is not None:
            self._kept_as = (period.pk, period.closed_at, cost_centre)
        elif everyone and self.open:
            self._kept_as = ("open", month, self.basis, _open_inputs(), cost_centre)

    @cached_property
    def _rows(self) -> QuerySet[Any]:
        """The statements as a query: an open month's stored totals, priced first where they
        are missing or not current (`open_month_totals`), or a closed month's statements."""
        rows: QuerySet[Any]
        if self.open:
            totals = open_month_totals(self._tenants, self.month, basis=self.basis)
            totals &= OpenMonthTotal.objects.visible_to(self._user)
            # A total in more than one currency cannot be priced: shown as nothing, in none.
            mixed = Q(currencies__contains=",")
            rows = totals.annotate(
                cost_centre=F("tenant__cost_centre"),
                currency=Case(
                    When(mixed, then=Value("")), default=F("currencies"), output_field=TextField()
                ),
                amount=Case(When(mixed, then=Value(Decimal("0.00"))), default=F("total")),
            )
        else:
            rows = (
                statements_seen(self._user, self._narrowed)
                .filter(period=self.period)
                .annotate(amount=F("total"))
            )
        if self.cost_centre is not None:
            rows = rows.filter(cost_centre=self.cost_centre)
        return rows

    @cached_property
    def _count(self) -> int:
        # Every statement is in one cost centre's total, which counts them: no count of its
        # own (a page reads both).
        return sum(row.statements for row in self.centre_totals())

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, part: slice) -> list[StatementView]:
        """The statements of `part`, new views each time (a page sets their `budget_used`)."""
        if self._kept_as is None or not self.open:
            return self._page(part)
        # An unpriceable statement says why in the reader's language.
        question = (self._order, self.descending, part.start, part.stop, get_language())
        kept = _open_pages.read((self._kept_as, question), lambda: self._page(part))
        return [replace(view) for view in kept]

    def _page(self, part: slice) -> list[StatementView]:
        names = ("amount" if name == "total" else name for name in self._order)
        order = [f"-{name}" if self.descending else name for name in names]
        rows: list[Any] = list(self._rows.select_related("tenant").order_by(*order)[part])
        if not self.open:
            return [_final(self.month, row) for row in rows]
        return [
            _open_view(
                self.month, row.tenant, self.basis, stored_total(row, row.tenant, self.month)
            )
            for row in rows
        ]

    @cached_property
    def _centre_totals(self) -> list[CentreTotal]:
        if self._kept_as is None:
            return self._centre_totals_read()
        return _centre_totals_kept.read(self._kept_as, self._centre_totals_read)

    def _centre_totals_read(self) -> list[CentreTotal]:
        grouped = (
            self._rows.order_by()
            .values_list("cost_centre", "currency")
            .annotate(sum=Sum("amount"), statements=Count("pk"))
        )
        return sorted(
            (
                CentreTotal(centre, currency, total, count)
                for centre, currency, total, count in grouped
            ),
            key=lambda row: (row.cost_centre, row.currency),
        )

    def centre_totals(self) -> list[CentreTotal]:
        """One row per cost centre and currency, of every statement (not a page's); read
        once."""
        return self._centre_totals


def _open_inputs() -> tuple[object, ...]:
    """What an open month's statements of every tenant are read from: what their totals are
    priced from (`provisional.priced_from`: the same inputs price the same totals, however
    often they are priced again) and the tenants' latest change (their names and cost
    centres are on the statements). One query."""
    return priced_from(stamped=[Tenant])


# Every tenant's statements of a month (`MonthStatements`), in this process: a closed month's
# totals per cost centre, an open month's too and its pages; at most `KEEP_SECONDS`
# (portal/metering/kept.py), so that a change the inputs do not see shows by then.
_centre_totals_kept: KeptReadings[CentreTotal] = KeptReadings()
_open_pages: KeptReadings[StatementView] = KeptReadings()


def grand_totals(centres: list[CentreTotal]) -> list[tuple[str, Decimal]]:
    """Per currency, the sum of the cost centres' totals."""
    totals: dict[str, Decimal] = {}
    for row in centres:
        totals[row.currency] = totals.get(row.currency, Decimal("0.00")) + row.total
    return sorted(totals.items())


def statement_for(user: User, statement_id: str) -> StatementView:
    """One statement by its name `<YYYY-MM>-<tenant>`; NotFound when the user may not see the
    tenant's statements or the name is not one."""
    match = STATEMENT_ID.fullmatch(statement_id or "")
    if match is None or not _known_month(int(match.group(1)), int(match.group(2))):
        raise NotFound(gettext("There is no such statement."))
    month = date(int(match.group(1)), int(match.group(2)), 1)
    tenant = tenants_seen(user).filter(slug=match.group(3)).first()
    if tenant is None:
        raise NotFound(gettext("There is no such statement."))
    period = _period(month)
    if period is not None and period.state == PeriodState.CLOSED:
        stored = Statement.objects.filter(period=period, tenant=tenant).first()
        if stored is None:
            raise NotFound(gettext("There is no such statement."))
        return _final(month, stored)
    priced = tenant_month_priced(tenant, month, basis=settings.PORTAL_CHARGE_BASIS)
    return _provisional(month, tenant, priced)


def statement_lines(
    statement: StatementView, *, start: int = 0, stop: int | None = None
) -> Iterator[LineView]:
    """The statement's lines in order (those from `start` to `stop` only, when given): read row
    by row from the database for a final one (a large month never sits in memory), priced now
    for a provisional one."""
    if statement.stored is not None:
        # Lines are at positions 1 to line_count: a page is a range of the index, not an OFFSET.
        rows = StatementLine.objects.filter(statement=statement.stored, position__gt=start)
        rows = rows.order_by("position")
        # A page is read at once (the lines after `start`, as many as it holds: with a LIMIT,
        # not `position <= stop`, which PostgreSQL estimated as a tenth of a 100,000-line
        # statement and read with parallel workers, 11 ms where the index gives 50 rows in
        # 0.05); all of them from a server-side cursor, a chunk at a time.
        read = rows.iterator(chunk_size=2000) if stop is None else rows[: max(stop - start, 0)]
        for row in read:
            yield LineView(
                row.gpu_model, row.offering, row.user, row.workload, row.quantity, row.unit,
                row.rate, row.currency, row.amount, row.used_gpu_hours,
            )  # fmt: skip
        return
    priced = tenant_month_priced(statement.tenant, statement.month, basis=statement.basis)
    for line in priced.lines[start:stop]:
        yield LineView(
            line.gpu_model, line.offering, line.user, line.workload, line.quantity, line.unit,
            line.rate, line.currency, line.amount, line.used_gpu_hours,
        )  # fmt: skip


def final_statement_cells(statement: StatementView) -> QuerySet[StatementLine, tuple[Any, ...]]:
    """A final statement's lines in order, as the columns LINE_CELLS names (the statement's own
    fields as constants): for the database to write as CSV. No rows for a provisional one (it
    has no stored lines)."""
    return (
        StatementLine.objects.filter(statement=statement.stored)
        .order_by("position")
        .annotate(
            period=Value(f"{statement.month:%Y-%m}"),
            tenant_slug=Value(statement.tenant.slug),
            centre=Value(statement.cost_centre),
            line_basis=Value(statement.basis),
            status=Value("final"),
        )
        .values_list(*[name for _, *names in LINE_CELLS for name in names])
    )


def statement_line_count(statement: StatementView) -> int:
    """How many lines the statement has (a final one stored it; a provisional one is priced to
    count them)."""
    if statement.stored is not None:
        return statement.stored.line_count
    return sum(1 for _ in statement_lines(statement))


@dataclass(frozen=True)
class HistoryEntry:
    """A close or reopening of the statement's month, with this tenant's total then."""

    action: str
    actor: str
    at: datetime
    comment: str
    total: str | None  # "20.00 EUR" as the event recorded it; None: not in that event


def statement_history(statement: StatementView) -> list[HistoryEntry]:
    """The closes and reopenings of the statement's month, oldest first: the audit events,
    each with the tenant's total it froze (a close) or discarded (a reopening)."""
    period = _period(statement.month)
    if period is None:
        return []
    events = AuditEvent.objects.filter(
        target_type=Period._meta.label_lower,
        target_id=str(period.pk),
        action__in=[HISTORY_CLOSE, HISTORY_REOPEN],
    ).order_by("at", "pk")
    entries = []
    for event in events:
        before, after = (event.changes.get("totals") or [None, None])[:2]
        totals = after if event.action == HISTORY_CLOSE else before
        entries.append(
            HistoryEntry(
                event.action,
                event.actor_name,
                event.at,
                event.comment,
                (totals or {}).get(statement.tenant.slug),
            )
        )
    return entries


def rate_cards() -> QuerySet[RateCard]:
    """Every rate card, newest first per model and backend: everyone sees the prices."""
    return RateCard.objects.select_related("gpu_model", "backend")


def periods() -> QuerySet[Period]:
    return Period.objects.all()


def statement_rows(statement: StatementView) -> Iterator[list[object]]:
    """The statement's lines as rows in LINE_COLUMNS order, for CSV and XLSX: quantities exact
    Fractions (CSV writes 10/7), money Decimals, no rate as None; read row by row, so a large
    statement never sits in memory."""
    status = "final" if statement.final else "provisional"
    period, tenant, centre, basis = (
        f"{statement.month:%Y-%m}",
        statement.tenant.slug,
        statement.cost_centre,
        statement.basis,
    )
    if statement.stored is not None:
        # A final statement can hold 100,000 lines: plain values from a server-side cursor, not
        # a model instance and a LineView per line (README, "make bench": 100,000 lines/s).
        columns = (
            "gpu_model", "offering", "user", "workload", "quantity_num", "quantity_den", "unit",
            "rate", "currency", "amount",
        )  # fmt: skip
        stored = (
            StatementLine.objects.filter(statement=statement.stored)
            .order_by("position")
            .values_list(*columns)
        )
        for (
            model,
            offering,
            user,
            workload,
            num,
            den,
            unit,
            rate,
            currency,
            amount,
        ) in stored.iterator(chunk_size=5000):
            yield [
                period, tenant, centre, model, offering, user, workload, Fraction(num, den),
                unit, rate, currency, amount, basis, status,
            ]  # fmt: skip
        return
    for line in statement_lines(statement):
        yield [
            period, tenant, centre, line.gpu_model, line.offering, line.user, line.workload,
            line.quantity, line.unit, line.rate, line.currency, line.amount, basis, status,
        ]  # fmt: skip
