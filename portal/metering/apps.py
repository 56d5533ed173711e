from django.apps import AppConfig


class MeteringConfig(AppConfig):
    name = "portal.metering"
    label = "metering"
    verbose_name = "Metering"

    def ready(self) -> None:
        from portal.metering.activity import notebook_activity
        from portal.workloads.culling import activity_source

        activity_source.register(notebook_activity)
