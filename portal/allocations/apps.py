from django.apps import AppConfig


class AllocationsConfig(AppConfig):
    name = "portal.allocations"
    label = "allocations"
    verbose_name = "GPU requests and allocations"
