"""Reading budgets: a tenant's monthly budget, how much of it the month has used so far, the
projection to the month's end, and the daily burn-down, for the pages, the API, the periodic
check and the request policy alike.

Spent so far is the month's provisional statement (`tenant_month_priced` on the charge basis in
force): its total for a budget in money (each line rounded once, as statements are), the sum of
its GPU lines' exact quantities for a budget in GPU-eq-hours (the lines of CPU core-hours and
memory GiB-hours count in money only). The projection is the linear run-rate over
the part of the month gone by: spent x (the month's length / the time elapsed); in its first
hour nothing is extrapolated yet.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from django.conf import settings
from django.utils.translation import gettext

from portal.accounts.models import User
from portal.billing.models import Budget, BudgetAlert, BudgetUnit, basis_quantity
from portal.billing.pricing import GPU, Priced, month_bounds, price, tenant_month_priced
from portal.billing.selectors import StatementView, tenants_seen
from portal.core.errors import Conflict, NotFound
from portal.metering.models import UsageRecord
from tenants.models import Tenant

CENT = Decimal("0.01")
TENTH = Decimal("0.1")
WARNING_PERCENT = BudgetAlert.THRESHOLDS[0]


@dataclass(frozen=True)
class BurnPoint:
    """Spent from the month's start to the end of `day` (UTC)."""

    day: date
    spent: Decimal


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    month: date
    spent: Decimal  # money to the cent, or GPU-eq-hours to two places (rounded half up)
    projected: Decimal  # the same, at the month's end at the run-rate so far
    series: list[BurnPoint]
    problem: str = ""  # why nothing could be priced (prices in another currency, or two)

    @property
    def unit_label(self) -> str:
        return self.budget.currency if self.budget.unit == BudgetUnit.MONEY else "GPU-eq-hours"

    @property
    def percent(self) -> Decimal:
        """Spent as a percentage of the budget, to one place."""
        return _percent(self.spent, self.budget.amount)

    @property
    def projected_percent(self) -> Decimal:
        return _percent(self.projected, self.budget.amount)

    @property
    def remaining(self) -> Decimal:
        return self.budget.amount - self.spent

    @property
    def over(self) -> bool:
        """Used up: the month has spent the whole budget (or more)."""
        return self.reached(100)

    def reached(self, threshold: int) -> bool:
        """Whether the month has spent `threshold` percent of the budget, exactly (not the
        rounded percent shown)."""
        return not self.problem and self.spent * 100 >= self.budget.amount * threshold

    @property
    def level(self) -> str:
        """ "over" (100% or more), "warning" (80% or more) or "ok"."""
        if self.problem:
            return "ok"
        if self.over:
            return "over"
        return "warning" if self.reached(WARNING_PERCENT) else "ok"

    @property
    def month_end(self) -> date:
        return month_bounds(self.month)[1].date() - timedelta(days=1)


def _percent(part: Decimal, whole: Decimal) -> Decimal:
    return (part * 100 / whole).quantize(TENTH, rounding=ROUND_HALF_UP)


def _hours(quantity: Fraction) -> Decimal:
    return (Decimal(quantity.numerator) / Decimal(quantity.denominator)).quantize(
        CENT, rounding=ROUND_HALF_UP
    )


def _series(priced: Priced, money: bool, first: date, last: date) -> list[BurnPoint]:
    """The cumulative spend at the end of each day from `first` to `last`. For money every
    line is priced on its running quantity and rounded once, so the last day's figure is the
    statement's total, as the rounding rule has it. Usage after `last` (none, but for a `now`
    inside the month in tests) counts on no day."""
    by_day: dict[date, list[tuple[int, Fraction]]] = {}
    for index, line in enumerate(priced.lines):
        for day, quantity in line.days.items():
            by_day.setdefault(day, []).append((index, quantity))
        # A line not made of days (the month's share of unreserved capacity) counts on the
        # last day shown, so the last figure is still the statement's total.
        undated = line.quantity - sum(line.days.values(), Fraction(0))
        if undated:
            by_day.setdefault(last, []).append((index, undated))
    running = [Fraction(0)] * len(priced.lines)
    money_total = Decimal("0.00")
    hours_total = Fraction(0)
    points = []
    day = first
    while day <= last:
        for index, quantity in by_day.get(day, []):
            rate = priced.lines[index].rate
            if money and rate is not None:
                money_total -= price(running[index], rate)
                running[index] += quantity
                money_total += price(running[index], rate)
            if priced.lines[index].resource == GPU:
                hours_total += quantity
        points.append(BurnPoint(day, money_total if money else _hours(hours_total)))
        day += timedelta(days=1)
    return points


def _projected(spent: Decimal, month: date, now: datetime) -> Decimal:
    begin, end = month_bounds(month)
    elapsed = min(now, end) - begin
    if elapsed < timedelta(hours=1):
        return spent
    factor = Decimal((end - begin).total_seconds()) / Decimal(elapsed.total_seconds())
    return (spent * factor).quantize(CENT, rounding=ROUND_HALF_UP)


def budget_status(budget: Budget, *, now: datetime | None = None) -> BudgetStatus:
    """Where `budget` stands in the month of `now` (default: this month, UTC). Three queries
    (the month's usage, grouped; the rate cards; the offerings' backends)."""
    now = now or datetime.now(UTC)
    month = now.date().replace(day=1)
    last_day = min(now.date(), month_bounds(month)[1].date() - timedelta(days=1))
    money = budget.unit == BudgetUnit.MONEY
    try:
        priced = tenant_month_priced(
            budget.tenant, month, basis=settings.PORTAL_CHARGE_BASIS, daily=True
        )
    except Conflict as error:
        return BudgetStatus(budget, month, Decimal(0), Decimal(0), [], problem=str(error))
    if money and priced.currency and priced.currency != budget.currency:
        problem = (
            f"This month's prices are in {priced.currency}; the budget is in {budget.currency}."
        )
        return BudgetStatus(budget, month, Decimal(0), Decimal(0), [], problem=problem)
    if money:
        spent = priced.total
    else:
        gpu_lines = (line for line in priced.lines if line.resource == GPU)
        spent = _hours(sum((line.quantity for line in gpu_lines), Fraction(0)))
    return BudgetStatus(
        budget,
        month,
        spent,
        _projected(spent, month, now),
        _series(priced, money, month, last_day),
    )


def budget_tenant(user: User, slug: str) -> Tenant:
    """The tenant `slug` if `user` may read its budget; NotFound otherwise (developers, and
    anyone who may not see the tenant, are not told whether it has one). Budgets are read where
    statements are."""
    tenant = tenants_seen(user).filter(slug=slug).first()
    if tenant is None:
        raise NotFound(gettext("There is no such tenant."))
    return tenant


def budget_of(tenant: Tenant) -> Budget | None:
    return Budget.objects.select_related("tenant", "updated_by").filter(tenant=tenant).first()


def budget_for(user: User, slug: str) -> Budget:
    """The budget of tenant `slug` if `user` may read it; NotFound when there is none or the
    user may not read it."""
    budget = budget_of(budget_tenant(user, slug))
    if budget is None:
        raise NotFound(gettext("This tenant has no budget."))
    return budget


def budget_column(month: date, statements: list[StatementView]) -> dict[int, str]:
    """For the month's statements list: the budget each tenant with one used, as "84.2%", by
    tenant id. Two queries whatever the number of tenants: the budgets, and (for budgets in
    GPU-eq-hours) the month's usage per tenant; money comes from the statements' totals. A
    statement in another currency than its budget, or one that could not be priced, gets none.
    GPU-eq-hours here are the tenant's own usage records, without the optional share of
    unreserved capacity that the budget section counts."""
    by_tenant = {view.tenant.pk: view for view in statements}
    budgets = list(Budget.objects.filter(tenant_id__in=by_tenant))
    in_hours = [budget.tenant_id for budget in budgets if budget.unit == BudgetUnit.GPU_EQ_HOURS]
    hours: dict[int, Fraction] = {}
    if in_hours:
        begin, end = month_bounds(month)
        sums = UsageRecord.objects.filter(
            tenant_id__in=in_hours, hour__gte=begin, hour__lt=end
        ).measure_sums(["tenant_id"])
        basis = {view.tenant.pk: view.basis for view in statements}
        hours = {key[0]: basis_quantity(measures, basis[key[0]]) for key, measures in sums.items()}
    column = {}
    for budget in budgets:
        view = by_tenant[budget.tenant_id]
        if view.problem:
            continue
        if budget.unit == BudgetUnit.GPU_EQ_HOURS:
            spent = _hours(hours.get(budget.tenant_id, Fraction(0)))
        elif view.currency in ("", budget.currency):
            spent = view.total
        else:
            continue
        column[budget.tenant_id] = f"{_percent(spent, budget.amount)}%"
    return column


def budget_policy_reason(tenant: Tenant) -> str | None:
    """Why a request of `tenant` that policy would approve at once waits for a lead instead:
    its budget asks for a lead's approval above it, and this month has used it up. None
    otherwise."""
    budget = Budget.objects.select_related("tenant").filter(tenant=tenant).first()
    if budget is None or not budget.approval_above:
        return None
    status = budget_status(budget)
    if not status.over:
        return None
    return (
        f"above this month's budget ({status.spent} of {budget.amount} {status.unit_label}, "
        f"{status.percent}%): a lead decides"
    )
