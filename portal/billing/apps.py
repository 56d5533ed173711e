from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "portal.billing"
    label = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        from portal.allocations.decisions import budget_source
        from portal.allocations.selectors import cost_source, price_source
        from portal.billing.budget_views import budget_section_context
        from portal.billing.budgets import budget_policy_reason
        from portal.billing.home import billing_home_register
        from portal.billing.pricing import allocation_costs, price_quote
        from portal.core import navigation
        from tenants.pages import TenantSection, tenant_sections

        price_source.register(price_quote)
        cost_source.register(allocation_costs)
        budget_source.register(budget_policy_reason)
        billing_home_register()
        navigation.nav_register(
            "Chargeback", "billing:statements", {"finance", "admin"}, position=60
        )
        tenant_sections.register(
            "chargeback",
            TenantSection("billing/tenant_link.html#chargeback-link", lambda _tenant: {}),
        )
        tenant_sections.register(
            "budget",
            TenantSection("billing/budget.html#budget-section", budget_section_context),
        )
