from django.apps import AppConfig


class MeteringConfig(AppConfig):
    name = "portal.metering"
    label = "metering"
    verbose_name = "Metering"
