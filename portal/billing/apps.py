from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "portal.billing"
    label = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        from portal.allocations.decisions import budget_source
        from portal.allocations.selectors import cost_source, price_source
        from portal.billing.budget_views import budget_section_context
        from portal.billing.budgets import budget_policy_reason
        from portal.billing.pricing import allocation_costs, price_quote
        from portal.core import navigation
        from tenants.pages import TenantSection, tenant_sections

        price_source.register(price_quote)
        cost_source.register(allocation_costs)
        budget_source.register(budget_policy_reason)
        # Finance lands on this month's statements; leads reach their tenants' from the tenant page.
        navigation.start_pages.register("finance", "billing:statements")
        navigation.nav_register(
            _("Chargeback"), "billing:statements", {"finance", "admin"}, position=60, group="money"
        )
        tenant_sections.register(
            "chargeback",
            TenantSection("billing/tenant_link.html#chargeback-link", lambda _tenant: {}),
        )
        tenant_sections.register(
            "budget",
            TenantSection("billing/budget.html#budget-section", budget_section_context),
        )
