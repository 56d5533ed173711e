from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "portal.billing"
    label = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        from portal.allocations.selectors import price_source
        from portal.billing.pricing import price_quote

        price_source.register(price_quote)
