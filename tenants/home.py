"""The tenants app's panels on the homes (portal.core.home): a lead's quota per GPU model with
what allocations hold of it, and the tenants that need an admin's attention."""

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.core.home import HOME_LED_TENANTS, HOME_ROWS, home_register
from tenants.access import tenants_led_first
from tenants.models import Tenant, TenantState
from tenants.selectors import QuotaLine, quota_lines_for, quota_lines_over


@dataclass(frozen=True)
class QuotaBurn:
    """One model's quota in a tenant and how much of it allocations hold (approved or active)."""

    tenant: Tenant
    line: QuotaLine

    @property
    def percent(self) -> int:
        """Held as a whole percentage of the quota (over 100 when a lowered quota left more
        held than allowed; 100 for a zero quota with anything held)."""
        if not self.line.quota:
            return 100 if self.line.used else 0
        return round(self.line.used * 100 / self.line.quota)

    @property
    def level(self) -> str:
        return "over" if self.percent >= 100 else "warning" if self.percent >= 80 else "ok"


def quota_burn_context(user: User) -> dict[str, Any]:
    """Each model's quota in the first HOME_ROWS tenants the user leads, with what is held of
    it. Three queries whatever the tenants, models and allocations."""
    tenants = tenants_led_first(user, HOME_LED_TENANTS)[: HOME_ROWS + 1]
    lines = quota_lines_for(tenant.pk for tenant in tenants[:HOME_ROWS])
    return {
        "burn_tenants": [
            (tenant, [QuotaBurn(tenant, line) for line in lines[tenant.pk]])
            for tenant in tenants[:HOME_ROWS]
        ],
        "burn_more_tenants": len(tenants) > HOME_ROWS,
    }


def attention_context(user: User) -> dict[str, Any]:
    """Suspended tenants and tenants whose allocations hold more than their quota (a quota was
    lowered below what is held). Five queries whatever the number of tenants."""
    tenants = Tenant.objects.visible_to(user)
    suspended = tenants.filter(state=TenantState.SUSPENDED).order_by("slug")
    suspended_rows = list(suspended[: HOME_ROWS + 1])
    # The active tenants as a subquery: an admin's are all of them.
    lines = quota_lines_over(tenants.filter(state=TenantState.ACTIVE).values("pk"))
    slugs = dict(
        Tenant.objects.filter(pk__in={tenant_id for tenant_id, _ in lines}).values_list(
            "pk", "slug"
        )
    )
    over = [(slugs[tenant_id], line) for tenant_id, line in lines]
    over.sort(key=lambda row: (row[0], row[1].gpu_model.name))
    return {
        "suspended": suspended_rows[:HOME_ROWS],
        "suspended_more": len(suspended_rows) > HOME_ROWS,
        "over_quota": over[:HOME_ROWS],
        "over_quota_count": len(over),
    }


def tenants_home_register() -> None:
    home_register(
        "quota-burn",
        {"lead"},
        position=12,
        title=_("Quota per GPU model"),
        template="tenants/_home_quota.html",
        context=quota_burn_context,
    )
    home_register(
        "attention",
        {"admin"},
        position=10,
        title=_("Tenants needing attention"),
        template="tenants/_home_attention.html",
        context=attention_context,
    )
