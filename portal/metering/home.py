"""The metering app's panels on the homes (portal.core.home): a member's own usage this month,
and the allocations a lead's tenants hold and barely use."""

from datetime import UTC, datetime
from typing import Any

from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.core.home import HOME_LED_TENANTS, HOME_ROWS, home_register
from portal.metering.idle import DEFAULT_HOURS, DEFAULT_THRESHOLD, IdleAllocation, idle_allocations
from portal.metering.selectors import UsageQuery, usage_totals
from tenants.access import tenants_led_first
from tenants.models import Tenant


def my_usage_context(user: User) -> dict[str, Any]:
    """The user's own usage from the first of this month (UTC) to today, per tenant. One
    query."""
    today = datetime.now(UTC).date()
    query = UsageQuery(start=today.replace(day=1), end=today, group_by=("tenant",), user=user)
    rows = usage_totals(user, query)
    return {"usage_rows": rows, "usage_month": today.replace(day=1)}


def idle_context(user: User) -> dict[str, Any]:
    """Idle allocations in the first HOME_ROWS tenants the user leads, least used first: three
    queries whatever the data."""
    tenants = tenants_led_first(user, HOME_LED_TENANTS)[: HOME_ROWS + 1]
    shown = {tenant.pk: tenant for tenant in tenants[:HOME_ROWS]}
    idle: list[tuple[Tenant, IdleAllocation]] = [
        (shown[item.allocation.tenant_id], item)
        for item in idle_allocations(tenants=list(shown.values()))
    ]
    return {
        "idle": idle[:HOME_ROWS],
        "idle_count": len(idle),
        "idle_tenants": tenants[:HOME_ROWS],
        "idle_more_tenants": len(tenants) > HOME_ROWS,
        "idle_hours": DEFAULT_HOURS,
        "idle_threshold": int(DEFAULT_THRESHOLD * 100),
    }


def metering_home_register() -> None:
    home_register(
        "my-usage",
        {"developer", "lead"},
        position=30,
        title=_("My usage this month"),
        template="metering/_home_usage.html",
        context=my_usage_context,
    )
    home_register(
        "idle",
        {"lead"},
        position=14,
        title=_("Idle allocations"),
        template="metering/_home_idle.html",
        context=idle_context,
    )
