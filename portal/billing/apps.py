from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "portal.billing"
    label = "billing"
    verbose_name = _("Billing")

    def ready(self) -> None:
        from portal.allocations.decisions import budget_source
        from portal.allocations.selectors import cost_source, price_source
        from portal.billing.budget_views import budget_section_context
        from portal.billing.budgets import budget_policy_reason
        from portal.billing.home import billing_home_register
        from portal.billing.models import RateCard
        from portal.billing.pricing import allocation_costs, price_quote
        from portal.catalog.cache import catalog_follows
        from portal.core import navigation
        from tenants.pages import TenantSection, tenant_sections

        # The lists' and forms' estimates read the rate cards kept with the catalog.
        catalog_follows(RateCard)
        price_source.register(price_quote)
        cost_source.register(allocation_costs)
        budget_source.register(budget_policy_reason)
        billing_home_register()
        # A lazy label: translated when the navigation is drawn, in the reader's language.
        navigation.nav_register(
            _("Chargeback"), "billing:statements", {"finance", "admin"}, position=60, group="money"
        )
        tenant_sections.register(
            "chargeback",
            TenantSection("billing/tenant_link.html#chargeback-link", lambda _tenant: {}),
        )
        tenant_sections.register(
            "budget",
            TenantSection(
                "billing/budget.html#budget",
                budget_section_context,
                title=_("Budget"),
                assets="billing/budget.html#budget-assets",
                shown=lambda page: page["can_lead"] or page["sees_all_tenants"],
            ),
        )
