from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "portal.billing"
    label = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        from portal.allocations.selectors import cost_source, price_source
        from portal.billing.pricing import allocation_costs, price_quote

        price_source.register(price_quote)
        cost_source.register(allocation_costs)
