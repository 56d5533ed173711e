from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "portal.billing"
    label = "billing"
    verbose_name = "Billing"
