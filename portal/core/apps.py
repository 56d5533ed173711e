from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "portal.core"
    label = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from portal.core import metrics
        from portal.core.navigation import nav_register

        metrics.connect()
        nav_register("Audit log", "audit", {"developer", "lead", "finance", "admin"}, position=140)
