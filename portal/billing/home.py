"""The billing app's panels on the homes (portal.core.home): a member's own cost this month, a
lead's budgets, and finance's spend per tenant this month so far and in the last closed month."""

from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.billing.budgets import BudgetStatus, budget_status
from portal.billing.models import Budget, PeriodState
from portal.billing.pricing import current_month, month_priced
from portal.billing.selectors import periods
from portal.billing.spend import SpendRow, spend_for
from portal.core.home import HOME_LED_TENANTS, HOME_ROWS, home_register
from tenants.access import tenants_led_by, tenants_led_first, tenants_of

# How many tenants finance's spend panel lists (the biggest first); the rest are on the page.
SPEND_ROWS = 8


def my_cost_context(user: User) -> dict[str, Any]:
    """What the user's own usage costs this month so far, per tenant and currency, priced as
    the month's provisional statements price it (their lines of this user). A bounded number
    of queries whatever the tenants: `month_priced` prices them all at once."""
    month = current_month()
    tenants = list(tenants_of(user).order_by("slug"))
    priced = month_priced(tenants, month, basis=settings.PORTAL_CHARGE_BASIS)
    costs = []
    for tenant in tenants:
        amounts: dict[str, Decimal] = defaultdict(Decimal)
        for line in priced[tenant.pk].lines:
            if line.user == user.username and line.currency:
                amounts[line.currency] += line.amount
        costs += [(tenant, currency, amount) for currency, amount in sorted(amounts.items())]
    return {"costs": costs, "cost_month": month}


def budgets_context(user: User) -> dict[str, Any]:
    """Where the budgets of the first HOME_ROWS tenants the user leads stand this month: three
    queries per budget, so a bounded number whatever the data."""
    led = tenants_led_by(user)
    budgets = list(
        Budget.objects.filter(tenant__in=led)
        .select_related("tenant")
        .order_by("tenant__slug")[: HOME_ROWS + 1]
    )
    statuses: list[BudgetStatus] = [budget_status(budget) for budget in budgets[:HOME_ROWS]]
    budgeted = {budget.tenant_id for budget in budgets}
    return {
        "budget_statuses": statuses,
        "budgets_more": len(budgets) > HOME_ROWS,
        # At most HOME_ROWS led tenants have a budget here: the first HOME_ROWS without one
        # are among the first HOME_LED_TENANTS, which the other panels read too.
        "unbudgeted": [
            tenant
            for tenant in tenants_led_first(user, HOME_LED_TENANTS)
            if tenant.pk not in budgeted
        ][:HOME_ROWS]
        if len(budgets) <= HOME_ROWS
        else [],
    }


def _totals(rows: list[SpendRow]) -> list[tuple[str, Decimal]]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        if row.currency:
            totals[row.currency] += row.total
    return sorted(totals.items())


def spend_context(user: User) -> dict[str, Any]:
    """This month so far per tenant (provisional, approx.) with its total per currency, and the
    last closed month's total per currency. `spend_for` runs a bounded number of queries
    whatever the tenants; the biggest SPEND_ROWS tenants are listed."""
    month = current_month()
    now = spend_for(user, month, month)
    rows = sorted(now.rows, key=lambda row: (-row.total, row.tenant.slug))
    closed = periods().filter(state=PeriodState.CLOSED, month__lt=month).order_by("-month").first()
    last = spend_for(user, closed.month, closed.month) if closed else None
    return {
        "spend_month": month,
        "spend_rows": [(row, f"{row.month:%Y-%m}-{row.tenant.slug}") for row in rows[:SPEND_ROWS]],
        "spend_more": max(len(rows) - SPEND_ROWS, 0),
        "spend_totals": _totals(now.rows),
        "closed_month": closed.month if closed else None,
        "closed_totals": _totals(last.rows) if last else [],
        "closed_tenants": len(last.rows) if last else 0,
    }


def billing_home_register() -> None:
    home_register(
        "spend",
        {"finance"},
        position=10,
        title=_("Spend this month so far"),
        template="billing/_home_spend.html",
        context=spend_context,
    )
    home_register(
        "budgets",
        {"lead"},
        position=13,
        title=_("Budgets this month"),
        template="billing/_home_budgets.html",
        context=budgets_context,
    )
    home_register(
        "my-cost",
        {"developer", "lead"},
        position=31,
        title=_("My cost this month"),
        template="billing/_home_cost.html",
        context=my_cost_context,
    )
