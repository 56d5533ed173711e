from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CoreConfig(AppConfig):
    name = "portal.core"
    label = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from portal.core import metrics, navigation
        from portal.core.database_roles import grant_after_migrate
        from portal.core.navigation import nav_register

        metrics.connect()
        # Once per `migrate` (sent for this app only), after every app's migrations.
        post_migrate.connect(grant_after_migrate, sender=self)
        # Every persona starts on its home, whose panels the apps register (portal.core.home).
        for persona in navigation.PERSONAS:
            navigation.start_pages.register(persona, "home")
        nav_register(_("Home"), "home", set(navigation.PERSONAS), position=0)
        nav_register(
            _("Audit log"),
            "audit",
            {"developer", "lead", "finance", "admin"},
            position=140,
            group="records",
        )
